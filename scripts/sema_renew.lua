-- include: acquire_rare renew_common
-- sema_renew: the watchdog's batch renewal (or check) of Semaphore holds;
-- renew_common is prepended.
--
-- KEYS[i]      semaphore hash of item i (see sema_common); its holds by
--              deadline are the key named with ":d" after it, in the same
--              hash slot (the batch names one key per item)
-- ARGV[2i-1]   generation of item i's hold
-- ARGV[2i]     lease in milliseconds; 0 only checks the hold
--
-- Returns per item 1 when the hold is alive (its deadline now at least now
-- + lease), 0 when it is gone or expired: an expired hold is never revived.
local now = math.floor(now_us() / 1000)
return renew_each(2, function(hash, gen, lease)
	lease = tonumber(lease)
	local holds = hash .. ':d'
	local dl = tonumber(redis.call('zscore', holds, gen) or 0)
	if dl <= now then
		return false
	end
	if lease > 0 and now + lease > dl then
		redis.call('zadd', holds, now + lease, gen)
		if redis.call('pttl', hash) < lease then
			redis.call('pexpire', hash, lease)
			redis.call('pexpire', holds, lease)
		end
	end
	return true
end)
