-- include: latch_common
-- latch_delete: remove a closed CountDownLatch without opening it: its
-- generation is marked deleted (latch_common), and its waiters are told at
-- once, so that they fail.
--
-- KEYS[1]  latch hash (see latch_set)
-- KEYS[2]  the latch's channel
-- KEYS[3]  the latch's mark (see latch_common)
-- ARGV[1]  op id of this request
-- ARGV[2]  publish command: "publish" or "spublish"
-- ARGV[3]  the mark's lifetime in ms
--
-- Returns 1 deleted, also to this request resent after its reply was lost;
-- 0 the latch was not closed (nothing changed).
local hash = KEYS[1]
if redis.call('exists', hash) == 1 then
	local f = redis.call('hmget', hash, 'g', '~v')
	layout_check(f[2], hash)
	local gen = f[1] or '-'
	redis.call('del', hash)
	latch_mark(KEYS[3], 'x:' .. gen, ARGV[3])
	latch_mark(KEYS[3], 'd:' .. ARGV[1], ARGV[3])
	redis.call(ARGV[2], KEYS[2], 'all')
	return 1
end
if latch_marked(KEYS[3], 'd:' .. ARGV[1], ARGV[3]) then
	return 1
end
return 0
