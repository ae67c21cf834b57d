-- include: acquire_common release_common sema_common
-- sema_release: give back the permits of one hold of a Semaphore, and hand
-- them on, in the same call, to the waiters at the head of the queue they
-- serve (see sema_serve): only those wake.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  tail, "<prefix>:{name}:sema:last": the latch of the last
--          releases (see release_common)
-- KEYS[3]  its holds by deadline (":sema:d")
-- KEYS[4]  its queue (":sema:q")
-- KEYS[5]  its claims by deadline (":sema:c")
-- ARGV[1]  generation of the hold
-- ARGV[2]  op id of this request
-- ARGV[3]  publish command
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns 1 released (also for a replay the tail's latch records), -1 the
-- hold was gone (lost; nothing changed but the reclaim of ended holds).
local k = {h = KEYS[1], d = KEYS[3], q = KEYS[4], c = KEYS[5]}
local st = sema_open(k, math.floor(now_us() / 1000))
if not st.cap or not sema_drop(st, ARGV[1]) then
	return release_replay(KEYS[2], ARGV[2])
end
sema_serve(st, ARGV[3], ARGV[5], nil)
sema_wake_head(st, ARGV[3], nil)
sema_store(st)
end_hold(KEYS[2], ARGV[2], nil, ARGV[4])
return 1
