-- rw_force_release: remove every read hold, or the write hold, whoever has it.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  waiting writers
-- KEYS[3]  readers' channel
-- KEYS[4]  writers' channel
-- KEYS[5]  tail: keeps the last write token when the lock ends up free
-- ARGV[1]  "r" for the read holds, "w" for the write hold
-- ARGV[2]  publish command: "publish" or "spublish"
-- ARGV[3]  tail lifetime in milliseconds (the unlock latch)
--
-- Returns 1 when a hold was removed, 0 when there was none.
local now = now_ms()
scan(KEYS[1], now, true)
local all = redis.call('hgetall', KEYS[1])
local removed = 0
for i = 1, #all, 2 do
	local kind, owner = string.match(all[i], '^(%a+):(.*)$')
	if kind == ARGV[1] then
		drop(KEYS[1], kind, owner)
		removed = 1
	end
end
if removed == 1 then
	local free = settle(KEYS[1], scan(KEYS[1], now, false), now, KEYS[5], ARGV[3])
	announce(ARGV[2], KEYS[3], KEYS[4], free, waiting(KEYS[2], now))
end
return removed
