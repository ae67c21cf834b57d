-- include: rw_common
-- rw_state: what the query methods report, read-only.
--
-- KEYS[1]  lock hash (see rw_common)
-- ARGV[1]  owner, or "" for none
--
-- Returns {readers, writer, read holds of owner, write holds of owner}:
-- readers is the number of owners with a live read hold, writer is 1 when
-- a live write hold exists. Expired holders count as gone.
local now = now_ms()
local st = scan(KEYS[1], now, false)
local function live(kind)
	if ARGV[1] == '' then
		return 0
	end
	local dl = tonumber(redis.call('hget', KEYS[1], kind .. 'd:' .. ARGV[1]) or 0)
	if dl <= now then
		return 0
	end
	return tonumber(redis.call('hget', KEYS[1], kind .. ':' .. ARGV[1]) or 0)
end
local writer = 0
if st.writer ~= nil then
	writer = 1
end
return {st.readers, writer, live('r'), live('w')}
