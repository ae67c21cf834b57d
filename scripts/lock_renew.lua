-- lock_renew: the watchdog's batch renewal (or check) of exclusive holds
-- (Lock and FairLock, whose hashes have the same fields).
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
local out = {}
for i = 1, #KEYS do
	local lease = tonumber(ARGV[2 * i])
	if redis.call('hget', KEYS[i], '~g') == ARGV[2 * i - 1] then
		if lease > 0 and redis.call('pttl', KEYS[i]) < lease then
			redis.call('pexpire', KEYS[i], lease)
		end
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
