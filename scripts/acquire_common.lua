-- acquire_common: helpers prepended to the acquire scripts (see scripts.go).
--
-- The replay contract shared by every lock type: a hold is one generation,
-- named by the op id of the acquire that started it (field ~g, or per owner
-- in an RWLock); every mutating request carries an op id of its own, and the
-- last one applied is recorded (~o). A replayed request (go-redis resent it
-- after losing the reply) is recognised by its op id, never by arithmetic
-- on counts, which a local lease end or a late reply can make ambiguous.

-- now_us is the server's clock in microseconds.
local function now_us()
	local t = redis.call('time')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- next_token returns a fencing token above every token this lock name has
-- handed out that Redis still knows of (last: the current hold's ~t, and the
-- tail left by the last release), and at least the server's clock in µs, so
-- that tokens keep increasing when Redis forgets (a restart without
-- persistence, a failover to a replica that missed writes, eviction) as long
-- as the server clocks do not step back by more than the time that took.
local function next_token(tail, last)
	local prev = math.max(tonumber(last or 0), tonumber(redis.call('get', tail) or 0))
	local now = now_us()
	if now > prev then
		return now
	end
	return prev + 1
end

-- fmt writes a token (a double holding an integer up to 2^53) in full:
-- Lua's default conversion would round it to 14 digits.
local function fmt(n)
	return string.format('%.0f', n)
end
