-- lock_ttl: the lease left of an exclusive lock (Lock, FairLock, SpinLock),
-- for TTL. A free Lock's hash lives on without a hold, keeping its last
-- token and release latch (see release_common): only a hash with a
-- generation (~g) is held, and only then is its PTTL a lease.
--
-- KEYS[1]  lock hash
--
-- Returns the hash's PTTL in ms while held, -2 when free.
if redis.call('hexists', KEYS[1], '~g') == 0 then
	return -2
end
return redis.call('pttl', KEYS[1])
