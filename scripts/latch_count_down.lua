-- include: latch_common
-- latch_count_down: count a CountDownLatch down by one; the CountDown that
-- opens it deletes its hash, marks its generation opened (latch_common) and
-- tells every waiter at once.
--
-- KEYS[1]  latch hash (see latch_set)
-- KEYS[2]  the latch's channel
-- KEYS[3]  the latch's mark (see latch_common)
-- ARGV[1]  op id of this request
-- ARGV[2]  publish command: "publish" or "spublish"
-- ARGV[3]  the mark's lifetime in ms
--
-- Returns the count left (0: open, also when it was open already).
-- Idempotent under replay while the latch is closed: an op already applied
-- is not counted twice.
local hash = KEYS[1]
local f = redis.call('hmget', hash, 'n', '~v')
layout_check(f[2], hash)
local n = tonumber(f[1] or 0)
if n <= 0 then
	return 0
end
if redis.call('hexists', hash, 'o:' .. ARGV[1]) == 1 then
	return n
end
n = n - 1
if n > 0 then
	redis.call('hset', hash, 'n', n, 'o:' .. ARGV[1], 1)
	return n
end
local gen = redis.call('hget', hash, 'g') or '-'
redis.call('del', hash)
latch_mark(KEYS[3], 'o:' .. gen, ARGV[3])
redis.call(ARGV[2], KEYS[2], 'all')
return 0
