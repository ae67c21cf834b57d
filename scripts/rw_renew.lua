-- rw_renew: the watchdog's batch renewal of read and write holds.
--
-- KEYS[i]      lock hash of item i (see rw_common)
-- ARGV[1]      lease in milliseconds
-- ARGV[2i]     count field of item i ("r:<owner>" or "w:<owner>")
-- ARGV[2i+1]   deadline field of item i ("rd:<owner>" or "wd:<owner>")
--
-- Returns an array with, per item, 1 when the hold is alive and its deadline
-- was pushed to now + lease, 0 when it is gone or expired (nothing changed
-- for it): an expired hold is never revived.
local now = now_ms()
local lease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
	local cf, df = ARGV[2 * i], ARGV[2 * i + 1]
	local dl = tonumber(redis.call('hget', KEYS[i], df) or 0)
	if dl > now and redis.call('hexists', KEYS[i], cf) == 1 then
		if now + lease > dl then
			redis.call('hset', KEYS[i], df, now + lease)
		end
		if redis.call('pttl', KEYS[i]) < lease then
			redis.call('pexpire', KEYS[i], lease)
		end
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
