-- fair_acquire: take or re-enter a fair lock, or queue up for it.
--
-- KEYS[1]  lock hash: as lock_acquire's (owner -> count, ~g, ~o, ~t)
-- KEYS[2]  queue: list of waiting owners, oldest first
-- KEYS[3]  waiter deadlines: sorted set owner -> deadline (server ms)
-- KEYS[4]  tail: the last released hold's token
-- KEYS[5]  prefix of the waiters' channels (a channel, not a key: it carries
--          the lock's hash tag so that the channels share its slot)
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation the caller holds ("" : a new acquisition)
-- ARGV[4]  lease in milliseconds
-- ARGV[5]  "1" to hand out a fencing token on a new acquisition, "0" not to
-- ARGV[6]  waiter timeout in milliseconds
-- ARGV[7]  publish command: "publish" or "spublish"
--
-- Returns {1, token, count}  acquired
--         {0, pttl}          not this owner's turn: it is queued (or its
--                            deadline pushed forward); pttl is the holder's
--                            remaining lease, -2 when the lock is free but
--                            another waiter is first
--         {-1, 0}            the caller's generation no longer holds: lost
--
-- Idempotent under replay, as lock_acquire; queueing an owner that is
-- queued only moves its deadline.
local hash, owner, op, gen = KEYS[1], ARGV[1], ARGV[2], ARGV[3]

if gen ~= '' then
	-- Re-entry never waits in the queue: the owner holds the lock already.
	return reenter_hold(hash, owner, op, gen, ARGV[4])
end

local cur = redis.call('hmget', hash, owner, '~o', '~t')
if cur[2] == op then
	return {1, tonumber(cur[3] or 0), tonumber(cur[1] or 0)}
end
local now = now_ms()
local head = evict(KEYS[2], KEYS[3], now)
local mine = cur[1] ~= false and cur[1] ~= nil
local free = mine or redis.call('exists', hash) == 0
if free and (head == nil or head == owner or mine) then
	if head == owner then
		redis.call('lpop', KEYS[2])
	end
	redis.call('zrem', KEYS[3], owner)
	redis.call('lrem', KEYS[2], 0, owner)
	return {1, grant_new(hash, KEYS[4], owner, op, ARGV[4], ARGV[5], cur[3]), 1}
end

local timeout = tonumber(ARGV[6])
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
	wake(ARGV[7], KEYS[5], head)
end
return {0, redis.call('pttl', hash)}
