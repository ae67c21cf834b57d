-- red_fence: raise one node's fencing counter to a RedLock token, so that a
-- majority of nodes knows the token before it is handed out (see redlock.go).
--
-- KEYS[1]  lock hash on this node
-- KEYS[2]  fencing counter on this node
-- ARGV[1]  owner
-- ARGV[2]  token: the largest counter value among the nodes that granted
--
-- Returns 1 when the owner still holds the lock on this node and the counter
-- is now at least the token, 0 when the hold is gone (nothing is changed: a
-- node that no longer holds the lock for this owner must not vouch for it).
-- Raising a counter is idempotent, so a replay is harmless.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
	return 0
end
if tonumber(redis.call('get', KEYS[2]) or 0) < tonumber(ARGV[2]) then
	redis.call('set', KEYS[2], ARGV[2])
end
return 1
