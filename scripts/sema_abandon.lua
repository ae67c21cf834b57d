-- include: acquire_rare sema_common
-- sema_abandon: a waiter that gave up leaves the queue; a grant that
-- crossed its leaving is given back, and the permits it frees (or that a
-- large request leaving the head lets through) go to the waiters they
-- serve.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  its holds by deadline (":sema:d")
-- KEYS[3]  its queue (":sema:q")
-- KEYS[4]  its claims by deadline (":sema:c")
-- ARGV[1]  waiter id (the op id its attempts sent)
-- ARGV[2]  publish command
-- ARGV[3]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns 1.
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], c = KEYS[4]}
local w = ARGV[1]
local st = sema_open(k, math.floor(now_us() / 1000))
if not st.cap then
	return 1
end
if st.waiters > 0 and redis.call('zscore', k.q, w) then
	sema_unqueue(st, w)
end
sema_drop(st, w)
sema_serve(st, ARGV[2], ARGV[3], nil)
sema_wake_head(st, ARGV[2], nil)
sema_store(st)
return 1
