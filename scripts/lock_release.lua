-- lock_release: release one hold of a reentrant exclusive lock.
--
-- KEYS[1]  lock hash (see lock_acquire)
-- KEYS[2]  unlock channel, told when the lock becomes free
-- KEYS[3]  latch key of this request: marks a final release as done
-- KEYS[4]  tail: keeps the last token for the latch's time
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation the caller holds
-- ARGV[4]  "1" when the caller releases its last hold: the lock is freed
--          whatever the count says, "0" for a re-entry's release
-- ARGV[5]  publish command: "publish" or "spublish" (sharded pub/sub)
-- ARGV[6]  latch lifetime in milliseconds
-- ARGV[7]  message to publish ("1": wake one waiter)
--
-- Returns  1  the lock is free now
--          0  one hold released, the owner still holds the rest
--         -1  the caller's generation does not hold the lock: it was lost,
--             and nothing was changed
--
-- Idempotent under replay: a request whose op id is the last applied, or
-- whose latch exists, already ran.
local done, token = release_hold(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], KEYS[3])
if done then
	return done
end
redis.call('del', KEYS[1])
redis.call(ARGV[5], KEYS[2], ARGV[7])
end_hold(KEYS[3], KEYS[4], token, ARGV[6])
return 1
