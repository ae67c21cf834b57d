-- include: acquire_rare sema_common timeset_common void_common
-- sema_release: give back the permits of one hold of a Semaphore, and hand
-- them on, in the same call, to the waiters at the head of the queue they
-- serve (see sema_serve): only those wake.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  the latch of the releases, "<prefix>:{name}:sema:r:last" (see
--          below)
-- KEYS[3]  its holds by deadline (":sema:d")
-- KEYS[4]  its queue (":sema:q")
-- KEYS[5]  its claims by deadline (":sema:c")
-- ARGV[1]  generation of the hold
-- ARGV[2]  op id of this request
-- ARGV[3]  publish command
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  "1" to trust every PUBLISH (see sema_serve)
-- ARGV[6]  as lock_release's ARGV[9] (void_common)
--
-- Returns 1 released (also for a replay the latch records), -1 the hold
-- was gone (lost; nothing changed but the reclaim of ended holds).
--
-- The latch is a timeset (timeset_common) of the op ids of the releases,
-- with the latch lifetime: a replay finds its op id there; a release of a
-- hold already gone could read as a replay only if two op ids shared a
-- fingerprint (a chance of 2^-64).

local k = {h = KEYS[1], d = KEYS[3], q = KEYS[4], c = KEYS[5]}
local st = sema_open(k, math.floor(now_us() / 1000))
local void = ARGV[6] == '1'
if not st.cap or not sema_drop(st, ARGV[1]) then
	if void then
		void_mark(k.h, st.x, ARGV[1], ARGV[4])
	end
	if timeset_has(KEYS[2], ARGV[2], st.now, ARGV[4]) then
		return 1
	end
	return -1
end
sema_serve(st, ARGV[3], ARGV[5], nil)
sema_wake_head(st, ARGV[3], nil)
sema_store(st)
if void then
	-- The release of an acquire of unknown outcome, or the final release
	-- of a hold whose acquire was sent twice, named by the op id:
	-- the request, if it has yet to run, takes nothing (void_common).
	void_mark(k.h, st.x, ARGV[1], ARGV[4])
end
timeset_add(KEYS[2], ARGV[2], st.now, ARGV[4])
return 1
