-- include: renew_common
-- lock_renew: the watchdog's batch renewal (or check) of exclusive holds
-- (Lock and FairLock, whose hashes have the same fields). renew_common is
-- prepended.
--
-- KEYS[i]      lock hash of item i
-- ARGV[2i-1]   generation of item i's hold
-- ARGV[2i]     lease in milliseconds; 0 only checks the hold
--
-- Returns an array with, per item, 1 when that generation still holds the
-- lock (its lease now at least the given one: a renewal never shortens a
-- longer lease), 0 when it is gone (nothing is changed for it). Checking the
-- generation and extending are one atomic step, so a renewal can never
-- revive a lock that was released, nor extend a later hold of the owner.
return renew_each(2, function(hash, gen, lease)
	lease = tonumber(lease)
	if redis.call('hget', hash, '~g') ~= gen then
		return false
	end
	if lease > 0 and redis.call('pttl', hash) < lease then
		redis.call('pexpire', hash, lease)
	end
	return true
end)
