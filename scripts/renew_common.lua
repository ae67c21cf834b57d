-- include: layout_common
-- renew_common: the batch of the renewal scripts (lock_renew, rw_renew),
-- prepended to them; not run on its own.
--
-- renew_each calls renew(key, ...) for each item of a batch: KEYS[i] and
-- the item's stride values of ARGV, in order. It returns the array the
-- watchdog reads: per item, 1 when renew returned true (the hold is alive,
-- and renewed), 0 when it returned false (gone; nothing was changed for it).
local function renew_each(stride, renew)
	local out = {}
	for i = 1, #KEYS do
		local alive = renew(KEYS[i], unpack(ARGV, stride * (i - 1) + 1, stride * i))
		out[i] = alive and 1 or 0
	end
	return out
end
