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
--
-- A renewal longer than the hold's ~l raises it (see hand_over in
-- handover_common: ~l bounds every PTTL a waiter was told). A hold whose
-- hash has a layout this relock does not know (layout_common) is reported
-- gone, not renewed: one refusal would fail the whole batch.
return renew_each(2, function(hash, gen, lease)
	local cur = redis.call('hmget', hash, '~g', '~l', '~v')
	if cur[1] ~= gen or not layout_known(cur[3]) then
		return false
	end
	local ms = tonumber(lease)
	if ms > 0 and redis.call('pttl', hash) < ms then
		redis.call('pexpire', hash, lease)
		if ms > tonumber(cur[2] or 0) then
			redis.call('hset', hash, '~l', lease)
		end
	end
	return true
end)
