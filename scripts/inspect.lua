-- inspect: a read-only snapshot of every lock type of one name, for
-- (*Client).Inspect. It writes nothing and evicts nothing: the Go side reads
-- the layout (inspect.go), so this script only gathers raw values in one
-- atomic step, with the server's clock.
--
-- KEYS[1]  Lock hash
-- KEYS[2]  Lock fencing counter (layout of older versions; may not exist)
-- KEYS[3]  FairLock hash
-- KEYS[4]  FairLock fencing counter (older versions)
-- KEYS[5]  FairLock queue of older versions (list of waiting owners)
-- KEYS[6]  FairLock waiter deadlines of older versions (sorted set owner ->
--          server ms)
-- KEYS[7]  RWLock hash
-- KEYS[8]  RWLock fencing counter (older versions)
-- KEYS[9]  RWLock waiting writers of older versions (sorted set owner ->
--          claim deadline; writers now queue in the RWLock hash, field ~q)
-- KEYS[10] FairLock queue (string of entries, see fair_common)
--
-- Returns {seconds, microseconds,              -- server TIME
--          lock fields, lock pttl, lock fence,
--          fair fields, fair pttl, fair fence, queue, deadlines,
--          rw fields, rw pttl, rw fence, writers, fair queue}
-- where fields are HGETALL's flat list, deadlines and writers ZRANGE
-- WITHSCORES's, a fence is "" when its key does not exist. A key of an
-- unexpected type (not written by relock) reads as absent.

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

local function list(key)
	if typed(key, 'list') then
		return redis.call('lrange', key, 0, -1)
	end
	return {}
end

local function zset(key)
	if typed(key, 'zset') then
		return redis.call('zrange', key, 0, -1, 'withscores')
	end
	return {}
end

local t = redis.call('time')
return {
	tonumber(t[1]), tonumber(t[2]),
	hash(KEYS[1]), pttl(KEYS[1]), str(KEYS[2]),
	hash(KEYS[3]), pttl(KEYS[3]), str(KEYS[4]), list(KEYS[5]), zset(KEYS[6]),
	hash(KEYS[7]), pttl(KEYS[7]), str(KEYS[8]), zset(KEYS[9]),
	str(KEYS[10]),
}
