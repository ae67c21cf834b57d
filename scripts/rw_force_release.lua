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
-- ARGV[6]  the Clients' own channels' prefix ('' : tell nobody, see
--          force_tell)
-- ARGV[7]  the owner a guarded force release expects ('' : any): only its
--          hold of the kind is removed; ARGV[8] the write hold's fencing
--          token it expects ('' : any)
--
-- Returns the generations of the holds it removed ({} when there was none;
-- "" for a hold without one), so that the caller ends exactly those and not
-- a write hold handed over here. A lock that ends up free is handed over to
-- the next queued writer, as by rw_release. When a guard (ARGV[7], ARGV[8])
-- is not met, it replies force_refused's reply and changes nothing.
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
local token = ARGV[1] == 'w' and st.f['~t'] or nil
local want = ARGV[7]
if (want ~= '' and not st.dls[ARGV[1] .. 'd:' .. want]) or (ARGV[8] ~= '' and ARGV[8] ~= token) then
	return force_refused(token, owners)
end
if want ~= '' then
	owners = {want}
end
local gens = {}
for _, owner in ipairs(owners) do
	local _, _, gf = fields(ARGV[1], owner)
	gens[#gens + 1] = st.f[gf] or ''
	drop(st, ARGV[1], owner)
end
after_release(hash, st, now, env)
force_record(KEYS[3], ARGV[5], gens, ARGV[3])
force_tell(ARGV[6], gens, hash .. '#' .. ARGV[1], ARGV[5])
return gens
