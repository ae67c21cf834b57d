-- include: layout_common
-- red_fence: raise one node's token of a RedLock hold to the token handed
-- out, so that a majority of nodes knows it before it is (see redlock.go):
-- the tail a release leaves carries it, and the next token is above it.
--
-- KEYS[1]  lock hash on this node
-- ARGV[1]  generation of the hold
-- ARGV[2]  token: the largest among the nodes that granted
--
-- Returns 1 when the generation still holds the lock on this node and its
-- token is now at least the given one, 0 when the hold is gone (nothing is
-- changed: a node that no longer holds the lock must not vouch for it).
-- Raising is idempotent, so a replay is harmless.
local f = redis.call('hmget', KEYS[1], '~g', '~v')
layout_check(f[2], KEYS[1])
if f[1] ~= ARGV[1] then
	return 0
end
if tonumber(redis.call('hget', KEYS[1], '~t') or 0) < tonumber(ARGV[2]) then
	redis.call('hset', KEYS[1], '~t', ARGV[2])
end
return 1
