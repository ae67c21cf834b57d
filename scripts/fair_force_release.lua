-- fair_force_release: free a fair lock whoever holds it and wake the next
-- live waiter. The queue stays: its waiters are alive and keep their turn.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue
-- KEYS[3]  waiter deadlines
-- KEYS[4]  prefix of the waiters' channels (see fair_acquire)
-- KEYS[5]  tail: keeps the freed hold's token
-- ARGV[1]  publish command: "publish" or "spublish"
-- ARGV[2]  tail lifetime in milliseconds (the unlock latch)
--
-- Returns 1 when a lock was freed, 0 when it was not held.
local token = redis.call('hget', KEYS[1], '~t')
if redis.call('del', KEYS[1]) == 1 then
	if token and tonumber(token) > 0 then
		redis.call('set', KEYS[5], token, 'px', ARGV[2])
	end
	wake(ARGV[1], KEYS[4], evict(KEYS[2], KEYS[3], now_ms()))
	return 1
end
return 0
