-- latch_set: set a CountDownLatch's count, unless it is set already.
--
-- KEYS[1]  latch hash, "<prefix>:{name}:latch": n (the count) and o:<op>
--          per CountDown applied (its replay changes nothing)
-- ARGV[1]  the count (>= 1)
--
-- Returns 1 set, 0 the latch was already closed (count > 0; nothing changed).
if redis.call('exists', KEYS[1]) == 1 then
	return 0
end
redis.call('hset', KEYS[1], 'n', ARGV[1])
return 1
