-- include: acquire_rare sema_common
-- sema_state: read a Semaphore without writing (Available, inspection).
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  its holds by deadline (":sema:d")
-- KEYS[3]  its queue (":sema:q")
-- KEYS[4]  its claims by deadline (":sema:c")
--
-- Returns {capacity (0: none recorded), permits in use, waiters queued,
-- holds}, counting only live holds and claims: the running count less the
-- holds that ended and wait for their reclaim.
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], c = KEYS[4]}
local now = math.floor(now_us() / 1000)
local f = redis.call('hmget', k.h, '~p', '~u', '~v')
layout_check(f[3], k.h)
local used = tonumber(f[2] or 0)
local ended = redis.call('zrangebyscore', k.d, '-inf', now)
sema_each(k, ended, 'h:', function(_, vals)
	for _, v in ipairs(vals) do
		if v then
			used = used - sema_hold(v)
		end
	end
end)
local holds = redis.call('zcard', k.d) - #ended
local waiters = redis.call('zcard', k.q) - redis.call('zcount', k.c, '-inf', now)
if holds == 0 and waiters == 0 then
	return {0, 0, 0, 0}
end
return {tonumber(f[1] or 0), used, waiters, holds}
