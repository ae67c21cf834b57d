-- include: acquire_common sema_common force_common
-- sema_force_release: free every hold of a Semaphore, whoever has it; the
-- permits go to the waiters at the head of the queue they serve (see
-- sema_serve), as on a release. The queue keeps its order.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  its tail (":sema:last"), where the answer is kept for a replay
-- ARGV[1]  publish command
-- ARGV[2]  "1" to trust every PUBLISH (see sema_serve)
-- ARGV[3]  tail lifetime in milliseconds (the unlock latch)
-- ARGV[4]  op id of this request (see force_common)
--
-- Returns the generations of the holds it removed ({} when none was held):
-- the caller ends exactly those holds, not the ones the permits went to.
local hash = KEYS[1]
local replayed = force_replayed(KEYS[2], ARGV[4])
if replayed then
	return replayed
end
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
force_record(KEYS[2], ARGV[4], gens, ARGV[3])
return gens
