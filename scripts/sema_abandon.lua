-- include: acquire_common sema_common
-- sema_abandon: a waiter that gave up leaves the queue; a grant that
-- crossed its leaving is given back, and the permits it frees (or that a
-- large request leaving the head lets through) go to the waiters they
-- serve.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- ARGV[1]  waiter id (the op id its attempts sent)
-- ARGV[2]  publish command
-- ARGV[3]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns 1.
local hash, w = KEYS[1], ARGV[1]
local now = math.floor(now_us() / 1000)
local st = sema_scan(hash, now)
if not st.cap then
	return 1
end
local at = sema_queued(st, w)
if at then
	table.remove(st.q, at)
end
sema_drop(st, w)
sema_serve(hash, st, now, ARGV[2], ARGV[3], nil)
sema_store(hash, st, now)
return 1
