-- fair_release: release one hold of a fair lock; the final release wakes the
-- next live waiter, and only it.
--
-- KEYS[1]  lock hash (see fair_acquire)
-- KEYS[2]  queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  prefix of the waiters' channels (see fair_acquire)
-- KEYS[5]  latch key of this request: marks a final release as done
-- KEYS[6]  tail: keeps the last token for the latch's time
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation the caller holds
-- ARGV[4]  "1" for the caller's last hold (frees the lock), "0" otherwise
-- ARGV[5]  publish command: "publish" or "spublish"
-- ARGV[6]  latch lifetime in milliseconds
--
-- Returns 1 free now, 0 one hold released, -1 lost (nothing changed), as
-- lock_release; idempotent under replay, as lock_release.
local done, cur = release_hold(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], KEYS[5])
if done then
	return done
end
redis.call('del', KEYS[1])
wake(ARGV[5], KEYS[4], evict(KEYS[2], KEYS[3], now_ms()))
end_hold(KEYS[5], KEYS[6], cur[3], ARGV[6])
return 1
