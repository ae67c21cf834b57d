-- include: rw_common queue_common
-- rw_abandon: a waiting writer gives up. It leaves the queue; if a
-- hand-over made it the holder meanwhile (the grant crossed its decision to
-- leave), the write hold is released as by rw_release, handing the lock on.
--
-- KEYS[1]  lock hash
-- KEYS[2]  readers' channel
-- KEYS[3]  tail
-- ARGV[1]  owner; "" for whoever holds the write generation ARGV[2] (as
--          lock_abandon's)
-- ARGV[2]  the waiter id (the op id its attempts sent)
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[4]  tail lifetime in milliseconds (the unlock latch)
-- ARGV[5]  "1" to hand over without trusting PUBLISH's receiver count
--
-- Returns 1 when it released a hold handed to the waiter, 0 otherwise.
--
-- Readers that waited behind the claim are told once no writer holds or
-- waits. Idempotent: once the waiter is neither queued nor holding, it
-- changes nothing (but for evicting expired holders, as every script does).
local hash, owner, w = KEYS[1], ARGV[1], ARGV[2]
local env = {rch = KEYS[2], tail = KEYS[3], pub = ARGV[3], ms = ARGV[4], trust = ARGV[5]}
local now = now_ms()
local st = scan(hash, now, true)
if owner == '' then
	owner = st.writer or ''
end
local cf, _, gf = fields('w', owner)
local handed = 0
if st.f[gf] == w and st.f[cf] then
	drop(st, 'w', owner)
	handed = 1
else
	local q = st.f['~q'] or ''
	local rest = q_without(q, w, RW_ENTRY)
	if rest == q then
		return 0
	end
	update_queue(hash, st, rest)
end
after_release(hash, st, now, env)
return handed
