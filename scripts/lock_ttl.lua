-- include: layout_common
-- lock_ttl: the lease left of an exclusive lock (Lock, FairLock, SpinLock),
-- for TTL. A free Lock's hash lives on without a hold, keeping its last
-- token and release latch (see release_common): only a hash with a
-- generation (~g) is held, and only then is its PTTL a lease.
--
-- KEYS[1]  lock hash
--
-- Returns the hash's PTTL in ms while held, -2 when free.
local f = redis.call('hmget', KEYS[1], '~g', '~v')
layout_check(f[2], KEYS[1])
if not f[1] then
	return -2
end
return redis.call('pttl', KEYS[1])
