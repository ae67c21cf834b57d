-- rw_release: release one read or write hold of an owner.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  waiting writers
-- KEYS[3]  readers' channel (woken with "all")
-- KEYS[4]  writers' channel (woken with "1")
-- KEYS[5]  latch key of this request: marks a final release as done
-- KEYS[6]  tail: keeps the last write token for the latch's time
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation of the owner's hold of this kind
-- ARGV[4]  "r" to release a read hold, "w" a write hold
-- ARGV[5]  "1" for the caller's last hold of this kind, "0" otherwise
-- ARGV[6]  publish command: "publish" or "spublish"
-- ARGV[7]  latch lifetime in milliseconds
--
-- Returns  1  the owner has no hold of this kind left
--          0  one hold released, the owner still holds the rest
--         -1  the generation does not hold (lost); nothing was changed
--
-- The end of a write hold wakes the readers (unless a writer waits: it goes
-- first) and, once the lock is free, a writer; the last read hold to go
-- wakes a writer. Idempotent under replay, as lock_release.
local hash, owner, op, gen, kind = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = now_ms()
scan(hash, now, true)
local cf, df, gf, of = fields(kind, owner)
local cur = redis.call('hmget', hash, gf, of, cf)
if cur[1] ~= gen then
	return release_replay(KEYS[5])
end
if cur[2] == op then
	return 0
end
if ARGV[5] ~= '1' then
	if tonumber(cur[3] or 0) > 1 then
		redis.call('hincrby', hash, cf, -1)
	end
	redis.call('hset', hash, of, op)
	return 0
end
drop(hash, kind, owner)
local free = settle(hash, scan(hash, now, false), now, KEYS[6], ARGV[7])
if kind == 'w' or free then
	announce(ARGV[6], KEYS[3], KEYS[4], free, waiting(KEYS[2], now))
end
redis.call('set', KEYS[5], '1', 'px', ARGV[7])
return 1
