-- include: rw_common force_common
-- rw_force_release: remove every read hold, or the write hold, whoever has it.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  readers' channel
-- KEYS[3]  tail: keeps the last write token when the lock ends up free
-- KEYS[4]  queue (see rw_common)
-- ARGV[1]  "r" for the read holds, "w" for the write hold
-- ARGV[2]  publish command: "publish" or "spublish"
-- ARGV[3]  tail lifetime in milliseconds (the unlock latch)
-- ARGV[4]  "1" to hand over without trusting PUBLISH's receiver count
-- ARGV[5]  op id of this request (see force_common)
--
-- Returns the generations of the holds it removed ({} when there was none;
-- "" for a hold without one), so that the caller ends exactly those and not
-- a write hold handed over here. A lock that ends up free is handed over to
-- the next queued writer, as by rw_release.
local hash = KEYS[1]
local env = {rch = KEYS[2], tail = KEYS[3], q = KEYS[4], pub = ARGV[2], ms = ARGV[3], trust = ARGV[4]}
local replayed = force_replayed(KEYS[3], ARGV[5])
if replayed then
	return replayed
end
local now = now_ms()
local st = scan(hash, now, true)
local owners = {}
for field in pairs(st.dls) do
	local kind, owner = string.match(field, '^(%a)d:(.*)$')
	if kind == ARGV[1] then
		owners[#owners + 1] = owner
	end
end
if #owners == 0 then
	return {}
end
local gens = {}
for _, owner in ipairs(owners) do
	local _, _, gf = fields(ARGV[1], owner)
	gens[#gens + 1] = st.f[gf] or ''
	drop(st, ARGV[1], owner)
end
after_release(hash, st, now, env)
force_record(KEYS[3], ARGV[5], gens, ARGV[3])
return gens
