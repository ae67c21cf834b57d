-- rw_read_acquire: take or re-enter a read hold.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  waiting writers: sorted set owner -> claim deadline
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation of the owner's read hold ("" : new)
-- ARGV[4]  lease in milliseconds
--
-- Returns {1, 0, count}  acquired (read holds carry no fencing token)
--         {0, wait}      a writer holds the lock or waits for it: writers go
--                        first; wait is when that may change, in ms
--         {-1, 0}        the caller's generation no longer holds (lost)
--
-- Idempotent under replay: a request whose op id is the owner's last read
-- op already ran.
local hash, owner, op, gen = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local lease = tonumber(ARGV[4])
local now = now_ms()
local st = scan(hash, now, true)
local cf, df, gf, of = fields('r', owner)
local cur = redis.call('hmget', hash, cf, of)
-- A reader re-enters even when a writer waits: making it wait for a writer
-- that waits for it would deadlock.
local reply = seen(hash, 'r', owner, op, gen, lease, now, cur, 0)
if reply then
	return reply
end
-- The writer itself may read (downgrade); an owner's own leftover is taken
-- over.
if cur[1] or st.writer == owner then
	grant(hash, 'r', owner, op, lease, now)
	return {1, 0, 1}
end
if st.writer ~= nil then
	return {0, st.maxdl - now}
end
if waiting(KEYS[2], now) then
	local last = redis.call('zrange', KEYS[2], -1, -1, 'withscores')
	return {0, tonumber(last[2]) - now}
end
grant(hash, 'r', owner, op, lease, now)
return {1, 0, 1}
