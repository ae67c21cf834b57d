-- include: rw_common renew_common
-- rw_renew: the watchdog's batch renewal (or check) of read and write holds.
-- rw_common (with the helpers it uses, see scripts.go) and renew_common are
-- prepended.
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
return renew_each(4, function(hash, gf, df, gen, lease)
	lease = tonumber(lease)
	local f = redis.call('hmget', hash, df, gf, '~v')
	local dl = tonumber(f[1] or 0)
	if dl <= now or f[2] ~= gen or not layout_known(f[3]) then
		return false
	end
	if lease > 0 then
		extend(hash, df, lease, now)
	end
	return true
end)
