-- void_common: the void marks of a kind's main hash; made only where used
-- (a release asked to mark, an acquire whose hash has marks).
--
-- An acquire whose outcome its Client does not know (its reply did not come
-- by the caller's bound, or go-redis cut it short) is settled by a release
-- of the generation named by its op id, sent with the void argument: that
-- release frees what the acquire took, if anything, and marks the op id
-- void. The request itself may still be on its way: in the network, or in
-- the socket buffer of a connection Redis has not read yet, while the
-- settlement went out on another connection and ran first. An acquire whose
-- op id is marked takes nothing and clears its mark; without the mark it
-- would take the lock anew for a hold nobody knows of, until its lease ran
-- out. A request sent twice (the first cut short by its read timeout, then
-- sent again, whose grant the caller took) is settled so by its hold's
-- final release: the first may still arrive after it.
--
-- The marks are one field, ~x: the last VOID_SLOTS op ids marked, each
-- after a NUL, with a closing NUL (op ids never contain NUL). Every
-- acquire reads ~x in the HMGET it makes of its hash anyway (a hash
-- without marks has none). A mark outlives its request's arrival only when
-- the request ran before its settlement (the usual order), and then goes
-- when VOID_SLOTS later marks push it out or with the hash. A request later
-- than that, or than the hash's life when the mark made it (the unlock
-- latch's time), is not fenced.
local VOID_SLOTS = 8

-- void_mark marks op void in hash, whose marks are ring (its ~x; false or
-- nil: none); a hash the mark makes lives ms milliseconds, one that exists
-- keeps its own life (a Semaphore's hash has none: sema_store keeps the
-- marks when it removes the hash).
local function void_mark(hash, ring, op, ms)
	local fresh = redis.call('exists', hash) == 0
	local entry = op .. '\0'
	if not ring then
		ring = '\0' .. entry
	elseif not string.find(ring, '\0' .. entry, 1, true) then
		ring = ring .. entry
		local _, n = string.gsub(ring, '%z', '')
		if n > VOID_SLOTS + 1 then
			local second = string.find(ring, '\0', 2, true)
			ring = string.sub(ring, second)
		end
	end
	redis.call('hset', hash, '~x', ring)
	if fresh then
		redis.call('pexpire', hash, ms)
	end
end

-- void_claimed reports whether op is marked void in hash, whose marks are
-- ring (its ~x, not false), and clears the mark: the acquire then takes
-- nothing. It also returns the marks left (nil: none).
local function void_claimed(hash, ring, op)
	local at = string.find(ring, '\0' .. op .. '\0', 1, true)
	if not at then
		return false, ring
	end
	local rest = string.sub(ring, 1, at) .. string.sub(ring, at + #op + 2)
	if rest == '\0' then
		redis.call('hdel', hash, '~x')
		return true, nil
	end
	redis.call('hset', hash, '~x', rest)
	return true, rest
end
