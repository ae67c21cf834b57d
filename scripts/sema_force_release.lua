-- include: acquire_common sema_common
-- sema_force_release: free every hold of a Semaphore, whoever has it; the
-- permits go to the waiters at the head of the queue they serve (see
-- sema_serve), as on a release. The queue keeps its order.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- ARGV[1]  publish command
-- ARGV[2]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns the generations of the holds it removed ({} when none was held):
-- the caller ends exactly those holds, not the ones the permits went to.
local hash = KEYS[1]
local now = math.floor(now_us() / 1000)
local st = sema_scan(hash, now)
if not st.cap then
	return {}
end
local gens = {}
for g in pairs(st.holds) do
	gens[#gens + 1] = g
end
if #gens == 0 then
	return {}
end
for _, g in ipairs(gens) do
	sema_drop(st, g)
end
sema_serve(hash, st, now, ARGV[1], ARGV[2], nil)
sema_store(hash, st, now)
return gens
