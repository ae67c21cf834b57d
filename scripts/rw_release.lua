-- rw_release: release one read or write hold of an owner.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  waiting writers
-- KEYS[3]  readers' channel (woken with "all")
-- KEYS[4]  writers' channel (woken with "1")
-- KEYS[5]  latch key of this request: marks a final release as done
-- ARGV[1]  owner
-- ARGV[2]  hold count the caller believes this owner has (>= 1)
-- ARGV[3]  "r" to release a read hold, "w" a write hold
-- ARGV[4]  publish command: "publish" or "spublish"
-- ARGV[5]  latch lifetime in milliseconds
--
-- Returns  1  the owner has no hold of this kind left
--          0  one hold released, the owner still holds the rest
--         -1  the owner does not hold what the caller believed (lost);
--             nothing was changed
--
-- The end of a write hold wakes the readers (unless a writer waits: it goes
-- first) and, once the lock is free, a writer; the last read hold to go
-- wakes a writer. Idempotent under replay, as lock_release.
local cf, df = ARGV[3] .. ':' .. ARGV[1], ARGV[3] .. 'd:' .. ARGV[1]
local now = now_ms()
scan(KEYS[1], now, true)
local count = tonumber(redis.call('hget', KEYS[1], cf) or 0)
local believed = tonumber(ARGV[2])

if count == believed then
	if count > 1 then
		redis.call('hincrby', KEYS[1], cf, -1)
		return 0
	end
	redis.call('hdel', KEYS[1], cf, df)
	local st = scan(KEYS[1], now, false)
	local free = settle(KEYS[1], st, now)
	if ARGV[3] == 'w' or free then
		announce(ARGV[4], KEYS[3], KEYS[4], free, waiting(KEYS[2], now))
	end
	redis.call('set', KEYS[5], '1', 'px', ARGV[5])
	return 1
end
return replayed_release(count, believed, KEYS[5]) -- release_common.lua
