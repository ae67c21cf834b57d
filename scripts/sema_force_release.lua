-- include: acquire_rare sema_common force_common
-- sema_force_release: free every hold of a Semaphore, whoever has it; the
-- permits go to the waiters at the head of the queue they serve (see
-- sema_serve), as on a release. The queue keeps its order.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  its tail (":sema:last"), where the answer is kept for a replay
-- KEYS[3]  its holds by deadline (":sema:d")
-- KEYS[4]  its queue (":sema:q")
-- KEYS[5]  its claims by deadline (":sema:c")
-- ARGV[1]  publish command
-- ARGV[2]  "1" to trust every PUBLISH (see sema_serve)
-- ARGV[3]  tail lifetime in milliseconds (the unlock latch)
-- ARGV[4]  op id of this request (see force_common)
-- ARGV[5]  the Clients' own channels' prefix ('' : tell nobody, see
--          force_tell)
-- ARGV[6]  the owner a guarded force release expects ('' : any): only its
--          holds are removed, and when it holds none, it replies
--          force_refused's reply (no token: a permit has none) and changes
--          nothing
--
-- Returns the generations of the holds it removed ({} when none was held):
-- the caller ends exactly those holds, not the ones the permits went to.
local replayed = force_replayed(KEYS[2], ARGV[4])
if replayed then
	return replayed
end
local k = {h = KEYS[1], d = KEYS[3], q = KEYS[4], c = KEYS[5]}
local st = sema_open(k, math.floor(now_us() / 1000))
if not st.cap then
	return {}
end
local gens = redis.call('zrange', k.d, 0, -1)
if #gens == 0 then
	return {}
end
if ARGV[6] == '' then
	sema_each(k, gens, 'h:', function(fields)
		redis.call('hdel', k.h, unpack(fields))
	end)
	redis.call('del', k.d)
	st.used = 0
else
	local mine, owners = {}, {}
	sema_each(k, gens, 'h:', function(fields, vals)
		for i, v in ipairs(vals) do
			local owner = v and string.match(v, '^[^:]*:(.*)$')
			if owner == ARGV[6] then
				mine[#mine + 1] = string.sub(fields[i], 3)
				st.used = st.used - sema_hold(v)
			elseif owner then
				owners[#owners + 1] = owner
			end
		end
	end)
	if #mine == 0 then
		return force_refused(nil, owners)
	end
	gens = mine
	for _, g in ipairs(gens) do
		redis.call('hdel', k.h, 'h:' .. g)
		redis.call('zrem', k.d, g)
	end
end
sema_serve(st, ARGV[1], ARGV[2], nil)
sema_wake_head(st, ARGV[1], nil)
sema_store(st)
force_record(KEYS[2], ARGV[4], gens, ARGV[3])
force_tell(ARGV[5], gens, KEYS[1] .. '#', ARGV[4])
return gens
