-- timeset_common: a set that remembers each member for a lifetime, at 8
-- bytes a member, prepended to the scripts that keep one (a Semaphore's
-- release latch, sema_release; a CountDownLatch's mark, latch_common); not
-- run on its own.
--
-- The set is bounded by time, not by a count of members (a busy semaphore
-- fills any count in milliseconds): every member added in the last
-- lifetime is remembered, whatever their number. A member is remembered by
-- a fingerprint (the first 8 bytes of its SHA-1: two members share one with
-- a chance of 2^-64), in the slot of the lifetime it was added in:
-- TIMESET_SLOTS slots per lifetime, each a field of the set's hash named by
-- its number modulo TIMESET_NAMES, whose value is the fingerprints one
-- after the other. An add appends to its slot's value (a few KB at 1,000
-- adds/s), and the first add of a slot deletes the slots the set no longer
-- covers: the hash holds the members of one lifetime and a slot, at about 9
-- bytes each when slots are full and 15 at 100 adds/s (a sorted-set entry
-- costs 120 to 170). A lookup reads the slots of the last lifetime and
-- finds the fingerprint at a multiple of 8 bytes; a member is remembered
-- for the lifetime, and at most a slot longer while adds go on. The hash's
-- PTTL is the lifetime after its last add.
local TIMESET_SLOTS = 32
local TIMESET_NAMES = 100

-- timeset_slot returns, for a lifetime of ms, the slot of now and the
-- oldest slot a member younger than ms can be in.
local function timeset_slot(now, ms)
	ms = tonumber(ms)
	local w = math.max(1, math.ceil(ms / TIMESET_SLOTS))
	return math.floor(now / w), math.floor((now - ms) / w)
end

-- timeset_slot_name is the field of slot s: no two slots the hash may hold
-- at once (fewer than 2 * TIMESET_SLOTS + 4 apart) share one.
local function timeset_slot_name(s)
	return tostring(s % TIMESET_NAMES)
end

-- timeset_fingerprint is the 8 bytes that stand for member in the set.
local function timeset_fingerprint(member)
	local h = redis.sha1hex(member)
	local b = {}
	for i = 1, 16, 2 do
		b[#b + 1] = tonumber(string.sub(h, i, i + 1), 16)
	end
	return string.char(unpack(b))
end

-- timeset_has reports whether set remembers member at now (ms), for a
-- lifetime of ms.
local function timeset_has(set, member, now, ms)
	local s, oldest = timeset_slot(now, ms)
	local names = {}
	for x = oldest, s do
		names[#names + 1] = timeset_slot_name(x)
	end
	local fp = timeset_fingerprint(member)
	for _, v in ipairs(redis.call('hmget', set, unpack(names))) do
		local at = v and string.find(v, fp, 1, true)
		while at do
			if at % 8 == 1 then
				return true
			end
			at = string.find(v, fp, at + 1, true)
		end
	end
	return false
end

-- timeset_add adds member to set at now (ms), for a lifetime of ms; the
-- first add of a slot forgets the slots older than the lifetime.
local function timeset_add(set, member, now, ms)
	local s, oldest = timeset_slot(now, ms)
	local name = timeset_slot_name(s)
	local v = redis.call('hget', set, name)
	if not v then
		local gone = {}
		for x = s - TIMESET_NAMES + 1, oldest - 1 do
			gone[#gone + 1] = timeset_slot_name(x)
		end
		if #gone > 0 then
			redis.call('hdel', set, unpack(gone))
		end
		v = ''
	end
	redis.call('hset', set, name, v .. timeset_fingerprint(member))
	redis.call('pexpire', set, ms)
end
