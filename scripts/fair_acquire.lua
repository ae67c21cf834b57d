-- fair_acquire: take or re-enter a fair lock, or queue up for it.
--
-- KEYS[1]  lock hash: owner -> hold count, with the lease as its PTTL
-- KEYS[2]  queue: list of waiting owners, oldest first
-- KEYS[3]  waiter deadlines: sorted set owner -> deadline (server ms)
-- KEYS[4]  fencing counter of this lock (never expires)
-- KEYS[5]  prefix of the waiters' channels (a channel, not a key: it carries
--          the lock's hash tag so that the channels share its slot)
-- ARGV[1]  owner
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  hold count the caller believes this owner has (0: new acquisition)
-- ARGV[4]  "1" to hand out a fencing token on a new acquisition, "0" not to
-- ARGV[5]  waiter timeout in milliseconds
-- ARGV[6]  publish command: "publish" or "spublish"
--
-- Returns {1, token}  acquired (token as in lock_acquire)
--         {0, pttl}   not this owner's turn: it is queued (or its deadline
--                     pushed forward); pttl is the holder's remaining lease,
--                     -2 when the lock is free but another waiter is first
--         {-1, n}     this owner's count is n, not what the caller believed
--
-- Idempotent under replay: a count one above the caller's belief is this very
-- request's grant, and queueing an owner that is queued only moves its
-- deadline.
local owner = ARGV[1]
local count = tonumber(redis.call('hget', KEYS[1], owner) or 0)
local believed = tonumber(ARGV[3])


-- settled and fence_token come from acquire_common.lua.
local done = settled(count, believed, KEYS[4], ARGV[4])
if done then
	return done
end
if believed > 0 then
	-- Re-entry never waits in the queue: the owner holds the lock already.
	redis.call('hincrby', KEYS[1], owner, 1)
	if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
		redis.call('pexpire', KEYS[1], ARGV[2])
	end
	return {1, fence_token(KEYS[4], ARGV[4])}
end

local now = now_ms()
local head = evict(KEYS[2], KEYS[3], now)
local free = redis.call('exists', KEYS[1]) == 0
if free and (head == nil or head == owner) then
	if head then
		redis.call('lpop', KEYS[2])
		redis.call('zrem', KEYS[3], owner)
	end
	redis.call('hset', KEYS[1], owner, 1)
	redis.call('pexpire', KEYS[1], ARGV[2])
	if ARGV[4] == '1' then
		return {1, redis.call('incr', KEYS[4])}
	end
	return {1, 0}
end

local timeout = tonumber(ARGV[5])
if not redis.call('zscore', KEYS[3], owner) then
	redis.call('rpush', KEYS[2], owner)
end
redis.call('zadd', KEYS[3], now + timeout, owner)
-- The queue vanishes by itself if every waiter crashes.
for i = 2, 3 do
	if redis.call('pttl', KEYS[i]) < timeout then
		redis.call('pexpire', KEYS[i], timeout)
	end
end
if free then
	-- Free, but the head has not taken it: its wake-up may have gone to a
	-- waiter evicted since, or the holder's lease ran out without a release.
	wake(ARGV[6], KEYS[5], head)
end
return {0, redis.call('pttl', KEYS[1])}
