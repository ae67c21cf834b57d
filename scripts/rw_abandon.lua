-- include: rw_common queue_common
-- rw_abandon: a waiting writer gives up. It leaves the queue; if a
-- hand-over made it the holder meanwhile (the grant crossed its decision to
-- leave), the write hold is released as by rw_release, handing the lock on.
--
-- KEYS[1]  lock hash
-- KEYS[2]  readers' channel
-- KEYS[3]  tail
-- KEYS[4]  queue (see rw_common)
-- ARGV[1]  owner; "" for whoever holds the write generation ARGV[2] (as
--          lock_abandon's)
-- ARGV[2]  the waiter id (the op id its attempts sent)
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[4]  tail lifetime in milliseconds (the unlock latch)
-- ARGV[5]  "1" to hand over without trusting PUBLISH's receiver count
-- ARGV[6]  the waiter's lease in milliseconds and ARGV[7] its fencing flag,
--          as its attempts sent them: with ARGV[1], its entry in the queue
--
-- Returns 1 when it released a hold handed to the waiter, 0 otherwise.
--
-- Readers that waited behind the claim are told once no writer holds or
-- waits. Idempotent: once the waiter is neither queued nor holding, it
-- changes nothing (but for evicting expired holders, as every script does).
local hash, owner, w = KEYS[1], ARGV[1], ARGV[2]
local env = {rch = KEYS[2], tail = KEYS[3], q = KEYS[4], pub = ARGV[3], ms = ARGV[4], trust = ARGV[5]}
local now = now_ms()
local st = scan(hash, now, true)
local cf, _, gf = fields('w', st.writer or '')
if st.f[gf] == w and st.f[cf] and (owner == '' or owner == st.writer) then
	drop(st, 'w', st.writer)
	after_release(hash, st, now, env)
	return 1
end
if owner == '' or not wq_remove(st, env, q_entry(w, ARGV[6], ARGV[7], owner)) then
	return 0
end
if st.f['~q'] then
	redis.call('hset', hash, '~q', st.f['~q'])
else
	redis.call('hdel', hash, '~q')
end
after_release(hash, st, now, env)
return 0
