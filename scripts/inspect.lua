-- inspect: a read-only snapshot of every lock type of one name, for
-- (*Client).Inspect. It writes nothing and evicts nothing: the Go side reads
-- the layout (inspect.go), so this script only gathers raw values in one
-- atomic step, with the server's clock.
--
-- KEYS[1]  Lock hash
-- KEYS[2]  FairLock hash
-- KEYS[3]  FairLock queue (string of entries, see fair_common)
-- KEYS[4]  RWLock hash
-- KEYS[5]  Semaphore hash (its sorted sets, ":d", ":q" and ":c" after it,
--          are read from the same hash slot: see sema_common)
-- KEYS[6]  CountDownLatch hash
--
-- Returns {seconds, microseconds,              -- server TIME
--          lock fields, lock pttl,
--          fair fields, fair pttl, fair queue,
--          rw fields, semaphore fields, latch count}
-- where fields are HGETALL's flat list (the semaphore's followed by
-- "d:<gen>", deadline per hold and "q:<id>", claim deadline per waiter in
-- queue order, from its sorted sets), and the queue and the latch's count
-- (its field n) are "" when their key does not exist. A key of an unexpected type (not written by relock) reads
-- as absent.

local function typed(key, want)
	return redis.call('type', key)['ok'] == want
end

local function hash(key)
	if typed(key, 'hash') then
		return redis.call('hgetall', key)
	end
	return {}
end

local function pttl(key)
	if typed(key, 'hash') then
		return redis.call('pttl', key)
	end
	return -2
end

local function str(key)
	if typed(key, 'string') then
		return redis.call('get', key)
	end
	return ''
end

local function zset(key)
	return typed(key, 'zset')
end

-- sema reads a Semaphore: its hash's fields, then its holds' deadlines and
-- its waiters' claim deadlines, in queue order, as fields.
local function sema(key)
	local out = hash(key)
	if #out == 0 then
		return out
	end
	if zset(key .. ':d') then
		local d = redis.call('zrange', key .. ':d', 0, -1, 'withscores')
		for i = 1, #d, 2 do
			out[#out + 1], out[#out + 2] = 'd:' .. d[i], d[i + 1]
		end
	end
	if zset(key .. ':q') and zset(key .. ':c') then
		for _, id in ipairs(redis.call('zrange', key .. ':q', 0, -1)) do
			out[#out + 1], out[#out + 2] = 'q:' .. id, redis.call('zscore', key .. ':c', id) or '0'
		end
	end
	return out
end

local function count(key)
	if typed(key, 'hash') then
		return redis.call('hget', key, 'n') or ''
	end
	return ''
end

local t = redis.call('time')
return {
	tonumber(t[1]), tonumber(t[2]),
	hash(KEYS[1]), pttl(KEYS[1]),
	hash(KEYS[2]), pttl(KEYS[2]), str(KEYS[3]),
	hash(KEYS[4]),
	sema(KEYS[5]),
	count(KEYS[6]),
}
