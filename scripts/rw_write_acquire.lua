-- include: rw_common acquire_common queue_common void_common
-- rw_write_acquire: take or re-enter the write hold, or queue for it.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  tail: the last released write hold's token
-- KEYS[3]  readers' channel: waiting readers are told to re-check when a
--          hand-over here gives the lock a shorter lease (hand_over_write)
-- KEYS[4]  queue: the waiting writers' sorted set (see rw_common)
-- ARGV[1]  owner
-- ARGV[2]  op id of this request; a waiter sends the same one at each of
--          its attempts, and it is the waiter's id in the queue
-- ARGV[3]  generation of the owner's write hold ("" : new)
-- ARGV[4]  lease in milliseconds
-- ARGV[5]  "1" to hand out a fencing token on a new acquisition, "0" not to
-- ARGV[6]  waiter timeout in milliseconds: how long the claim (the queue)
--          lives unless renewed by the next attempt
-- ARGV[7]  "1" to queue the caller when the lock is held (it waits for a
--          hand-over), "0" not to (a TryLock that does not wait)
-- ARGV[8]  publish command: "publish" or "spublish"
-- ARGV[9]  "1" to hand over without trusting PUBLISH's receiver count
--          (classic pub/sub on a Cluster), "0" otherwise
-- ARGV[10] "<client id>:" when the caller's Client neither holds nor is
--          taking a read hold of this owner, "" when it does: a read hold
--          of the owner in Redis whose generation that Client made (see
--          acquire_common: a generation is an op id) is then a leftover of
--          its own (an Unlock whose release is still retried in the
--          background), taken over as Lock's acquire takes over the
--          owner's own. Any other read hold of the owner — this Client's,
--          or another process's under the same WithOwner id, which may
--          still hold it — makes the write acquire an upgrade
--
-- Returns {1, token, count}  acquired
--         {0, wait, place}   held by others: a waiter's claim is recorded or
--                            renewed (new readers now queue behind it); wait
--                            is the time until the latest hold's deadline,
--                            in ms; place as lock_acquire's
--         {-1, 0}            the caller's generation no longer holds (lost)
--         {-2, 0}            this owner holds a read hold that is not
--                            the Client's leftover (ARGV[10]): an upgrade
--                            would deadlock, nothing was changed
--
-- A free lock whose queue has live writers ahead of the caller goes to the
-- first of them that listens (see hand_over_write), as a release would have
-- given it. Idempotent under replay: a request whose op id is the owner's
-- last write op already ran — or was granted by a hand-over, which names the
-- hold after the waiter's id — and gets its lease from now.
local hash, owner, op, gen = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local lease = tonumber(ARGV[4])
local env = {tail = KEYS[2], rch = KEYS[3], q = KEYS[4], pub = ARGV[8], trust = ARGV[9]}
local now = now_ms()
local st = scan(hash, now, true)
local cf, df, gf, of = fields('w', owner)
local reply = seen(hash, 'w', owner, op, gen, lease, now, {st.f[cf], st.f[of], st.f[gf]}, tonumber(st.f['~t'] or 0))
if reply then
	return reply
end
if st.f['~x'] and void_claimed(hash, st.f['~x'], op) then
	-- A request its Client has settled already (void_common): nobody
	-- waits for this reply.
	return {0, 0, 0}
end
if st.f['r:' .. owner] then
	local left = ARGV[10]
	if left == '' or string.sub(st.f['rg:' .. owner] or '', 1, #left) ~= left then
		return {-2, 0}
	end
	redis.call('hdel', hash, fields('r', owner))
	forget(st, 'r', owner)
	-- The leftover may have been the hold that ended last, which waiters
	-- were told to sleep until.
	wake_if_sooner(hash, st, env)
end
local e = q_entry(op, ARGV[4], ARGV[5], owner)
local function busy(wait)
	if ARGV[7] == '1' then
		return {0, wait, wq_put(hash, st, env, now, e, ARGV[6])}
	end
	return {0, wait, wq_place(st, env, e)}
end
local free = st.writer == owner or (st.writer == nil and st.readers == 0)
local handed
if free and st.writer == nil and wq_live(hash, st, now) then
	handed = hand_over_write(hash, st, now, env, op)
	if handed and handed ~= 'self' then
		return busy(handed)
	end
end
if not free then
	return busy(st.maxdl - now)
end
local token = 0
if ARGV[5] == '1' then
	token = rw_token(st, KEYS[2])
end
local extra = {'~t', fmt(token)}
carry_slot(st, extra)
-- The caller leaves the queue: its entry was walked past (handed 'self'),
-- or is taken out here.
local left = handed == 'self'
if not handed and st.f['~q'] then
	left = wq_remove(st, env, e)
end
if left and st.f['~q'] then
	extra[#extra + 1], extra[#extra + 2] = '~q', st.f['~q']
elseif left then
	redis.call('hdel', hash, '~q')
end
grant(hash, st, 'w', owner, op, lease, now, extra)
return {1, token, 1}
