-- fair_abandon: take a waiter that stops waiting out of the queue at once.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  prefix of the waiters' channels (see fair_acquire)
-- ARGV[1]  owner
-- ARGV[2]  publish command: "publish" or "spublish"
--
-- Returns 1 when the owner was queued, 0 when it was not.
--
-- When the lock is free the new head is woken: the wake-up of a release may
-- have gone to the waiter that is leaving.
local was = redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if redis.call('exists', KEYS[1]) == 0 then
	wake(ARGV[2], KEYS[4], evict(KEYS[2], KEYS[3], now_ms()))
end
return was
