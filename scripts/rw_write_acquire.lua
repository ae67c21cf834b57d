-- rw_write_acquire: take or re-enter the write hold, or claim the next turn.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  waiting writers: sorted set owner -> claim deadline
-- KEYS[3]  fencing counter of this lock (never expires)
-- ARGV[1]  owner
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  write holds the caller believes this owner has (0: new)
-- ARGV[4]  "1" to hand out a fencing token on a new acquisition, "0" not to
-- ARGV[5]  waiter timeout in milliseconds: how long the claim lives unless
--          renewed by the next attempt
--
-- Returns {1, token}  acquired
--         {0, wait}   held by others: this owner's claim is recorded (new
--                     readers now queue behind it); wait is the time until
--                     the latest hold's deadline, in ms
--         {-1, n}     this owner's write count is n, not what the caller
--                     believed (lost)
--         {-2, 0}     this owner holds a read hold: an upgrade would
--                     deadlock, nothing was changed
--
-- Idempotent under replay: a count one above the caller's belief is this
-- very request's grant; a claim is recorded once per owner.
local cf, df = 'w:' .. ARGV[1], 'wd:' .. ARGV[1]
local now = now_ms()
local st = scan(KEYS[1], now, true)
local count = tonumber(redis.call('hget', KEYS[1], cf) or 0)
local believed = tonumber(ARGV[3])


-- settled and fence_token come from acquire_common.lua.
local done = settled(count, believed, KEYS[3], ARGV[4])
if done then
	return done
end
if believed > 0 then
	hold(KEYS[1], cf, df, tonumber(ARGV[2]), now)
	return {1, fence_token(KEYS[3], ARGV[4])}
end
if redis.call('hexists', KEYS[1], 'r:' .. ARGV[1]) == 1 then
	return {-2, 0}
end
if st.writer == nil and st.readers == 0 then
	redis.call('zrem', KEYS[2], ARGV[1])
	hold(KEYS[1], cf, df, tonumber(ARGV[2]), now)
	if ARGV[4] == '1' then
		return {1, redis.call('incr', KEYS[3])}
	end
	return {1, 0}
end
local timeout = tonumber(ARGV[5])
redis.call('zadd', KEYS[2], now + timeout, ARGV[1])
if redis.call('pttl', KEYS[2]) < timeout then
	redis.call('pexpire', KEYS[2], timeout)
end
return {0, st.maxdl - now}
