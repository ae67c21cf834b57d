-- fair_release: release one hold of a fair lock; the final release wakes the
-- next live waiter, and only it.
--
-- KEYS[1]  lock hash: owner -> hold count
-- KEYS[2]  queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  prefix of the waiters' channels (see fair_acquire)
-- KEYS[5]  latch key of this request: marks a final release as done
-- ARGV[1]  owner
-- ARGV[2]  hold count the caller believes this owner has (>= 1)
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[4]  latch lifetime in milliseconds
--
-- Returns  1  the lock is free now
--          0  one hold released, the owner still holds the rest
--         -1  the owner does not hold what the caller believed (lost);
--             nothing was changed
--
-- Idempotent under replay, as lock_release.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
local believed = tonumber(ARGV[2])

if count == believed then
	if count > 1 then
		redis.call('hincrby', KEYS[1], ARGV[1], -1)
		return 0
	end
	redis.call('del', KEYS[1])
	wake(ARGV[3], KEYS[4], evict(KEYS[2], KEYS[3], now_ms()))
	redis.call('set', KEYS[5], '1', 'px', ARGV[4])
	return 1
end
return replayed_release(count, believed, KEYS[5]) -- release_common.lua
