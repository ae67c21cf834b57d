-- lock_force_release: free a lock whoever holds it.
--
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel
-- KEYS[3]  tail: keeps the freed hold's token
-- ARGV[1]  publish command: "publish" or "spublish"
-- ARGV[2]  message to publish ("all": every waiter re-checks)
-- ARGV[3]  tail lifetime in milliseconds (the unlock latch)
--
-- Returns 1 when a lock was freed, 0 when it was not held.
local token = redis.call('hget', KEYS[1], '~t')
if redis.call('del', KEYS[1]) == 1 then
	if token and tonumber(token) > 0 then
		redis.call('set', KEYS[3], token, 'px', ARGV[3])
	end
	redis.call(ARGV[1], KEYS[2], ARGV[2])
	return 1
end
return 0
