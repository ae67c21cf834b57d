-- sema_release: give back the permits of one hold of a Semaphore, and hand
-- them on, in the same call, to the waiters at the head of the queue they
-- serve (see sema_serve): only those wake.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  latch key of this request: marks the release as done
-- ARGV[1]  generation of the hold
-- ARGV[2]  publish command
-- ARGV[3]  latch lifetime in milliseconds
-- ARGV[4]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns 1 released (also for a replay whose latch exists), -1 the hold
-- was gone (lost; nothing changed but the eviction of expired holds).
local hash, gen = KEYS[1], ARGV[1]
local now = math.floor(now_us() / 1000)
local st = sema_scan(hash, now)
if not st.holds[gen] or not st.cap then
	if #st.gone > 0 and st.cap then
		sema_store(hash, st, now)
	end
	return release_replay(KEYS[2])
end
sema_drop(st, gen)
sema_serve(hash, st, now, ARGV[2], ARGV[4], nil)
sema_store(hash, st, now)
redis.call('set', KEYS[2], '1', 'px', ARGV[3])
return 1
