-- lock_renew: the watchdog's batch renewal of reentrant exclusive locks.
--
-- KEYS[i]    lock hash of item i
-- ARGV[1]    lease in milliseconds
-- ARGV[1+i]  owner of item i
--
-- Returns an array with, per item, 1 when the owner still holds the lock and
-- its lease was reset, 0 when the hold is gone (nothing is changed for it).
-- The ownership check and the extension are one atomic step, so a renewal can
-- never revive a lock that was released or taken over.
local out = {}
for i = 1, #KEYS do
	if redis.call('hexists', KEYS[i], ARGV[1 + i]) == 1 then
		redis.call('pexpire', KEYS[i], ARGV[1])
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
