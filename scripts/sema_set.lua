-- include: acquire_rare sema_common
-- sema_set: change a Semaphore's capacity (SetPermits). More permits serve
-- waiters at once; fewer let the holds go on and admit nobody until the
-- permits in use fall below the new capacity, and refuse the waiters that
-- ask for more than it (see sema_refuse).
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  its holds by deadline (":sema:d")
-- KEYS[3]  its queue (":sema:q")
-- KEYS[4]  its claims by deadline (":sema:c")
-- ARGV[1]  the new capacity
-- ARGV[2]  publish command
-- ARGV[3]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns the capacity recorded before (0 when none was: nobody held or
-- waited, and nothing is written).
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], c = KEYS[4]}
local st = sema_open(k, math.floor(now_us() / 1000))
local before = st.cap
if not before then
	return 0
end
st.cap = tonumber(ARGV[1])
if st.cap < before then
	sema_refuse(st, ARGV[2])
end
sema_serve(st, ARGV[2], ARGV[3], nil)
sema_wake_head(st, ARGV[2], nil)
sema_store(st)
return before
