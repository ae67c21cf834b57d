-- include: acquire_common sema_common
-- sema_set: change a Semaphore's capacity (SetPermits). More permits serve
-- waiters at once; fewer let the holds go on and admit nobody until the
-- permits in use fall below the new capacity.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- ARGV[1]  the new capacity
-- ARGV[2]  publish command
-- ARGV[3]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns the capacity recorded before (0 when none was: nobody held or
-- waited, and nothing is written).
local hash = KEYS[1]
local now = math.floor(now_us() / 1000)
local st = sema_scan(hash, now)
local before = st.cap or 0
st.cap = tonumber(ARGV[1])
sema_serve(hash, st, now, ARGV[2], ARGV[3], nil)
sema_store(hash, st, now)
return before
