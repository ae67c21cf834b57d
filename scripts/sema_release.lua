-- include: acquire_common release_common sema_common
-- sema_release: give back the permits of one hold of a Semaphore, and hand
-- them on, in the same call, to the waiters at the head of the queue they
-- serve (see sema_serve): only those wake.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  tail, "<prefix>:{name}:sema:last": the latch of the last
--          releases (see release_common)
-- ARGV[1]  generation of the hold
-- ARGV[2]  op id of this request
-- ARGV[3]  publish command
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns 1 released (also for a replay the tail's latch records), -1 the
-- hold was gone (lost; nothing changed but the eviction of expired holds).
local hash, gen = KEYS[1], ARGV[1]
local now = math.floor(now_us() / 1000)
local st = sema_scan(hash, now)
if not st.holds[gen] or not st.cap then
	if #st.gone > 0 and st.cap then
		sema_store(hash, st, now)
	end
	return release_replay(KEYS[2], ARGV[2])
end
sema_drop(st, gen)
sema_serve(hash, st, now, ARGV[3], ARGV[5], nil)
sema_store(hash, st, now)
end_hold(KEYS[2], ARGV[2], nil, ARGV[4])
return 1
