-- include: latch_common
-- latch_set: close a CountDownLatch with a count, unless it is closed
-- already.
--
-- KEYS[1]  latch hash, "<prefix>:{name}:latch": n (the count), g (its
--          generation: the op id of the TrySetCount that set it) and
--          o:<op> per CountDown applied (its replay changes nothing)
-- KEYS[2]  the latch's mark (see latch_common)
-- ARGV[1]  the count (>= 1)
-- ARGV[2]  op id of this request: the generation it sets
-- ARGV[3]  the mark's lifetime in ms
--
-- Returns 1 set, also to this request resent after its reply was lost
-- (the latch it set is still closed, or the mark says it has passed since);
-- 0 the latch was already closed by another request (nothing changed).
if redis.call('exists', KEYS[1]) == 1 then
	local f = redis.call('hmget', KEYS[1], 'g', '~v')
	layout_check(f[2], KEYS[1])
	if f[1] == ARGV[2] then
		return 1
	end
	return 0
end
if latch_marked(KEYS[2], 'o:' .. ARGV[2], ARGV[3]) or latch_marked(KEYS[2], 'x:' .. ARGV[2], ARGV[3]) then
	return 1
end
redis.call('hset', KEYS[1], 'n', ARGV[1], 'g', ARGV[2])
return 1
