-- rw_read_acquire: take or re-enter a read hold.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  waiting writers: sorted set owner -> claim deadline
-- ARGV[1]  owner
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  read holds the caller believes this owner has (0: new)
--
-- Returns {1, 0}     acquired (read holds carry no fencing token)
--         {0, wait}  a writer holds the lock or waits for it: writers go
--                    first; wait is when that may change, in ms
--         {-1, n}    this owner's read count is n, not what the caller
--                    believed (lost)
--
-- Idempotent under replay: a count one above the caller's belief is this
-- very request's grant.
local cf, df = 'r:' .. ARGV[1], 'rd:' .. ARGV[1]
local now = now_ms()
local st = scan(KEYS[1], now, true)
local count = tonumber(redis.call('hget', KEYS[1], cf) or 0)
local believed = tonumber(ARGV[3])
local lease = tonumber(ARGV[2])

local done = settled(count, believed, nil, '0') -- read holds carry no token
if done then
	return done
end
-- A reader re-enters even when a writer waits: making it wait for a writer
-- that waits for it would deadlock. The writer itself may read (downgrade).
if believed > 0 or st.writer == ARGV[1] then
	hold(KEYS[1], cf, df, lease, now)
	return {1, 0}
end
if st.writer ~= nil then
	return {0, st.maxdl - now}
end
if waiting(KEYS[2], now) then
	local last = redis.call('zrange', KEYS[2], -1, -1, 'withscores')
	return {0, tonumber(last[2]) - now}
end
hold(KEYS[1], cf, df, lease, now)
return {1, 0}
