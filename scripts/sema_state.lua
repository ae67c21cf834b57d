-- include: acquire_common sema_common
-- sema_state: read a Semaphore without writing (Available, inspection).
--
-- KEYS[1]  semaphore hash (see sema_common)
--
-- Returns {capacity (0: none recorded), permits in use, waiters queued,
-- holds}, counting only live holds and claims.
local now = math.floor(now_us() / 1000)
local st = sema_scan(KEYS[1], now)
local holds = 0
for _ in pairs(st.holds) do
	holds = holds + 1
end
return {st.cap or 0, st.used, #st.q, holds}
