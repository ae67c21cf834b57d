-- lock_release: release one hold of a reentrant exclusive lock.
--
-- KEYS[1]  lock hash: owner -> hold count
-- KEYS[2]  unlock channel, told when the lock becomes free
-- KEYS[3]  latch key of this request: marks a final release as done
-- ARGV[1]  owner
-- ARGV[2]  hold count the caller believes this owner has (>= 1)
-- ARGV[3]  publish command: "publish" or "spublish" (sharded pub/sub)
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  message to publish ("1": wake one waiter)
--
-- Returns  1  the lock is free now
--          0  one hold released, the owner still holds the rest
--         -1  the owner does not hold what the caller believed: the hold was
--             lost, and nothing was changed
--
-- Idempotent under replay: a count one below the caller's belief, or a free
-- lock whose latch exists, means this request already ran.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
local believed = tonumber(ARGV[2])

if count == believed then
	if count > 1 then
		redis.call('hincrby', KEYS[1], ARGV[1], -1)
		return 0
	end
	redis.call('del', KEYS[1])
	redis.call(ARGV[3], KEYS[2], ARGV[5])
	redis.call('set', KEYS[3], '1', 'px', ARGV[4])
	return 1
end
return replayed_release(count, believed, KEYS[3]) -- release_common.lua
