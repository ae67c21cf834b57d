-- lock_force_release: free a lock whoever holds it.
--
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel
-- ARGV[1]  publish command: "publish" or "spublish"
-- ARGV[2]  message to publish ("all": every waiter re-checks)
--
-- Returns 1 when a lock was freed, 0 when it was not held.
if redis.call('del', KEYS[1]) == 1 then
	redis.call(ARGV[1], KEYS[2], ARGV[2])
	return 1
end
return 0
