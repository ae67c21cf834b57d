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
local hash, owner, op, gen = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local cur = redis.call('hmget', hash, '~g', '~o', '~t')
if cur[1] ~= gen then
	return release_replay(KEYS[3])
end
if cur[2] == op then
	return 0
end
if ARGV[4] ~= '1' then
	if tonumber(redis.call('hget', hash, owner) or 0) > 1 then
		redis.call('hincrby', hash, owner, -1)
	end
	redis.call('hset', hash, '~o', op)
	return 0
end
redis.call('del', hash)
redis.call(ARGV[5], KEYS[2], ARGV[7])
end_hold(KEYS[3], KEYS[4], cur[3], ARGV[6])
return 1
