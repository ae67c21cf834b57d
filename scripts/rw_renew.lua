-- rw_renew: the watchdog's batch renewal (or check) of read and write holds.
--
-- KEYS[i]      lock hash of item i (see rw_common)
-- ARGV[4i-3]   generation field of item i ("rg:<owner>" or "wg:<owner>")
-- ARGV[4i-2]   deadline field of item i ("rd:<owner>" or "wd:<owner>")
-- ARGV[4i-1]   generation of item i's hold
-- ARGV[4i]     lease in milliseconds; 0 only checks the hold
--
-- Returns an array with, per item, 1 when that generation still holds and
-- is alive (its deadline now at least now + lease), 0 when it is gone or
-- expired (nothing changed for it): an expired hold is never revived, nor
-- a later generation extended.
local now = now_ms()
local out = {}
for i = 1, #KEYS do
	local gf, df, gen = ARGV[4 * i - 3], ARGV[4 * i - 2], ARGV[4 * i - 1]
	local lease = tonumber(ARGV[4 * i])
	local dl = tonumber(redis.call('hget', KEYS[i], df) or 0)
	if dl > now and redis.call('hget', KEYS[i], gf) == gen then
		if lease > 0 then
			extend(KEYS[i], df, lease, now)
		end
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
