-- latch_count_down: count a CountDownLatch down by one; the CountDown that
-- opens it deletes its hash and tells every waiter at once.
--
-- KEYS[1]  latch hash (see latch_set)
-- KEYS[2]  the latch's channel
-- ARGV[1]  op id of this request
-- ARGV[2]  publish command: "publish" or "spublish"
--
-- Returns the count left (0: open, also when it was open already).
-- Idempotent under replay while the latch is closed: an op already applied
-- is not counted twice.
local hash = KEYS[1]
local n = tonumber(redis.call('hget', hash, 'n') or 0)
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
redis.call('del', hash)
redis.call(ARGV[2], KEYS[2], 'all')
return 0
