-- include: acquire_common release_common queue_common listener_common
-- rw_common: helpers prepended to every rw_* script; not run on its own.
-- Before this file, every rw_* script carries acquire_common (tokens),
-- release_common (latches), queue_common (the queue's entries) and
-- listener_common (first_listener, the walk of hand_over_write).
--
-- An RWLock is one hash. Each holder has a count field and a deadline field
-- (server milliseconds), so that every hold expires on its own lease, and
-- the generation and last op of its hold (the replay contract of
-- acquire_common):
--   r:<owner>  read holds      rd:<owner>  read deadline
--   rg:<owner> read generation ro:<owner>  last read op
--   w:<owner>  write holds     wd:<owner>  write deadline
--   wg:<owner> write generation wo:<owner> last write op
--   ~t         fencing token of the last write hold
--   ~q         the waiting writers, in arrival order (see below)
--   ~r         set while readers wait: the next script that lets readers in
--              tells them, once, on the readers' channel
-- The hash's PTTL is the latest deadline, so it disappears with its last
-- holder, and its queue with it (the waiters, who sleep at most until then,
-- try again and queue anew). A holder whose deadline has passed (its
-- process died) is evicted by the next script that looks. Times come from
-- the server (TIME), so clock skew between processes does not matter.
--
-- The queue (~q): per waiting writer five NUL-terminated fields, its waiter
-- id (the op id its attempts send, "<client id>:<n>"), its lease in ms,
-- its fencing flag, its owner and its claim deadline (server ms). A live
-- claim (deadline not passed) makes new readers wait; every attempt of the
-- writer pushes its deadline to now + the waiter timeout, so the claim of a
-- writer that died lapses within that. The script that frees the lock hands
-- the write hold to the first live writer whose Client still listens (see
-- hand_over_write). Owners never contain NUL (WithOwner refuses it). The
-- format stays five fields (RW_ENTRY), apart from the four of Lock's and
-- FairLock's queues, whatever the helpers share: every version of relock
-- on one lock parses the queues of the others.

-- now_ms is the server's clock in milliseconds; clock_us keeps the reading
-- in µs, so that the script's token (next_token) and deadlines share one
-- TIME.
local clock_us
local function now_ms()
	clock_us = now_us()
	return math.floor(clock_us / 1000)
end

-- fields returns the count, deadline, generation and last-op fields of
-- owner's holds of kind ("r" or "w").
local function fields(kind, owner)
	return kind .. ':' .. owner, kind .. 'd:' .. owner, kind .. 'g:' .. owner, kind .. 'o:' .. owner
end

-- recount sets st's readers, writer and latest deadline from its live
-- deadlines (st.dls: deadline field -> server ms).
local function recount(st)
	st.readers, st.writer, st.maxdl = 0, nil, 0
	for df, dl in pairs(st.dls) do
		local kind, owner = string.match(df, '^(%a+):(.*)$')
		if kind == 'rd' then
			st.readers = st.readers + 1
		else
			st.writer = owner
		end
		if dl > st.maxdl then
			st.maxdl = dl
		end
	end
end

-- forget takes owner's hold of kind out of the state st (not out of Redis).
-- st.ended keeps the latest deadline of the live holds it took out, which
-- the waiters may have been told to sleep until (see hand_over_write).
local function forget(st, kind, owner)
	local cf, df, gf, of = fields(kind, owner)
	st.ended = math.max(st.ended or 0, st.dls[df] or 0)
	st.f[cf], st.f[df], st.f[gf], st.f[of] = nil, nil, nil, nil
	st.dls[df] = nil
	recount(st)
end

-- drop ends owner's hold of kind: st forgets it at once, and its fields
-- join st.gone, which after_release deletes from Redis — or not, when it
-- deletes the whole hash (an uncontended release deletes nothing twice).
-- Every script that drops a hold settles with after_release.
local function drop(st, kind, owner)
	st.gone = st.gone or {}
	for _, f in ipairs({fields(kind, owner)}) do
		st.gone[#st.gone + 1] = f
	end
	forget(st, kind, owner)
end

-- scan reads the whole hash (one HGETALL, which every script needs) and
-- evicts expired holders (when evict is true). It returns the state: f
-- (field -> value), dls (live deadline fields -> ms), readers (owners with a
-- live read hold), writer (owner of the live write hold or nil) and maxdl
-- (the latest live deadline, 0 for none).
local function scan(hash, now, evict)
	local all = redis.call('hgetall', hash)
	local st = {f = {}, dls = {}}
	for i = 1, #all, 2 do
		st.f[all[i]] = all[i + 1]
	end
	for i = 1, #all, 2 do
		local kind, owner = string.match(all[i], '^(%a+):(.*)$')
		if kind == 'rd' or kind == 'wd' then
			local dl = tonumber(all[i + 1])
			if dl > now then
				st.dls[all[i]] = dl
			elseif evict then
				redis.call('hdel', hash, fields(string.sub(kind, 1, 1), owner))
				forget(st, string.sub(kind, 1, 1), owner)
			end
		end
	end
	recount(st)
	return st
end

-- extend pushes deadline field df to now + lease (never shortening it) and
-- the hash's TTL to at least lease.
local function extend(hash, df, lease, now)
	local dl = now + lease
	if dl > tonumber(redis.call('hget', hash, df) or 0) then
		redis.call('hset', hash, df, dl)
	end
	-- Written even when it changes nothing, so that a WAIT after a claim
	-- (WithReplicas) covers the hand-over's writes (see reenter_or_replay in acquire_common).
	redis.call('pexpire', hash, math.max(redis.call('pttl', hash), lease))
end

-- grant starts a new hold of kind for owner, generation gen, in a hash
-- whose state is st: any leftover of an older generation of the owner's (a
-- hold its Client ended already, or one resumed with WithOwner) is taken
-- over. extra are more field-value pairs to write in the same HSET.
local function grant(hash, st, kind, owner, gen, lease, now, extra)
	local cf, df, gf, of = fields(kind, owner)
	local f = {cf, 1, df, now + lease, gf, gen, of, gen}
	for _, v in ipairs(extra or {}) do
		f[#f + 1] = v
	end
	redis.call('hset', hash, unpack(f))
	if now + lease > st.maxdl then
		redis.call('pexpire', hash, lease)
	end
	st.dls[df] = now + lease
	recount(st)
end

-- reenter adds one hold to generation gen of owner's hold of kind; nil when
-- that generation no longer holds (lost).
local function reenter(hash, kind, owner, gen, op, lease, now, cur)
	local cf, df, gf, of = fields(kind, owner)
	if cur[3] ~= gen then
		return nil
	end
	local count = redis.call('hincrby', hash, cf, 1)
	redis.call('hset', hash, of, op)
	extend(hash, df, lease, now)
	return count
end

-- seen answers an acquire of kind without looking at the other holders when
-- it can: a replay of the owner's last op (cur: the owner's count, last-op
-- and generation fields) gets the reply it had, its lease counted from now
-- (a waiter claiming a grant that reached it late counts the hold's end
-- from this attempt); a re-entry of generation gen gets its count (or
-- {-1, 0} when the generation is gone). token is the token to reply with.
-- nil: a new acquisition, left to the caller.
local function seen(hash, kind, owner, op, gen, lease, now, cur, token)
	if cur[2] == op then
		local _, df = fields(kind, owner)
		extend(hash, df, lease, now)
		return {1, token, tonumber(cur[1] or 0)}
	end
	if gen == '' then
		return nil
	end
	local count = reenter(hash, kind, owner, gen, op, lease, now, cur)
	if not count then
		return {-1, 0}
	end
	return {1, token, count}
end

local RW_ENTRY = q_pattern(5)

-- q_live returns queue q less the writers whose claim has lapsed, and the
-- latest live claim deadline (0 for none).
local function q_live(q, now)
	local out, last = {}, 0
	for e, _, _, _, _, dl in string.gmatch(q or '', RW_ENTRY) do
		dl = tonumber(dl)
		if dl > now then
			out[#out + 1] = e
			if dl > last then
				last = dl
			end
		end
	end
	return table.concat(out), last
end

-- q_put returns q with waiter w's claim renewed to deadline dl: in its place
-- if it is queued, else at the end; and w's place (Q_KEPT or Q_ANEW, see
-- queue_common).
local function q_put(q, w, lease, fencing, owner, dl)
	local entry = q_entry(w, lease, fencing, owner, dl)
	local out, found = {}, false
	for e, id in string.gmatch(q, RW_ENTRY) do
		if id == w then
			e, found = entry, true
		end
		out[#out + 1] = e
	end
	if not found then
		out[#out + 1] = entry
		return table.concat(out), Q_ANEW
	end
	return table.concat(out), Q_KEPT
end

-- update_queue writes q as the hash's queue (write_hash_queue) if it differs
-- from st's copy of it (st.f['~q']), and keeps that copy.
local function update_queue(hash, st, q)
	if q == (st.f['~q'] or '') then
		return
	end
	write_hash_queue(hash, q)
	st.f['~q'] = q ~= '' and q or nil
end

-- mark_readers records that a reader waits (see ~r).
local function mark_readers(hash, st)
	if not st.f['~r'] then
		redis.call('hset', hash, '~r', '1')
		st.f['~r'] = '1'
	end
end

-- wake_readers tells the waiting readers, if any, that they may go in.
local function wake_readers(hash, st, env)
	if st.f['~r'] then
		redis.call(env.pub, env.rch, 'all')
		redis.call('hdel', hash, '~r')
		st.f['~r'] = nil
	end
end

-- hand_over_write gives the write hold of the lock in hash, which nobody
-- holds (state st), to the first writer of the live queue q whose Client
-- still listens, in the same call (see first_listener; its token is a new
-- one above ~t and the tail), and writes the hold — count 1, generation and
-- last op = the waiter id, deadline now + the waiter's lease. Writers
-- skipped leave the queue. The entry of waiter self (the caller of an
-- acquire, "" for none) stops the hand-over. A lease shorter than the freed
-- holds' wakes the writers left and the waiting readers (env.rch).
--
-- It returns the rest of the queue (after the granted or reached entry) and
-- the granted lease, or 'self' when the caller's own entry came first, or
-- nil when nobody was handed the lock (the rest is then empty).
local function hand_over_write(hash, st, now, q, env, self)
	local function fence()
		return next_token(env.tail, st.f['~t'], clock_us)
	end
	local next, rest = q_reader(q, RW_ENTRY)
	local how, w, lease, _, owner, token = first_listener(hash, next, RW_ENTRY, fence, env.pub, env.trust, self)
	q = rest()
	if how == 'self' then
		return q, 'self'
	end
	if not how then
		return '', nil
	end
	lease = tonumber(lease)
	local extra = {'~t', fmt(token)}
	if q ~= '' then
		extra[3], extra[4] = '~q', q
	end
	grant(hash, st, 'w', owner, w, lease, now, extra)
	st.f['~t'] = fmt(token)
	if q == '' and st.f['~q'] then
		redis.call('hdel', hash, '~q')
	end
	st.f['~q'] = q ~= '' and q or nil
	if now + lease < (st.ended or 0) then
		-- The writers left slept until the freed hold's deadline; the hash,
		-- and the queue in it, ends with this shorter one (as hand_over).
		-- So did the waiting readers (~r): they re-check, and sleep on the
		-- new hold's lease.
		wake_queue(hash, (q_reader(q, RW_ENTRY)), RW_ENTRY, env.pub)
		wake_readers(hash, st, env)
	end
	return q, lease
end

-- after_release settles the lock once holds may have ended (a release, an
-- eviction, a force-release, a writer that gave up): st is its state after
-- the change. A free lock is handed over to the first live queued writer
-- that listens; failing that, its hash goes (the tail keeps its last write
-- token, and env.op, when given, in the latch, for the latch's time,
-- env.ms: see release_common) and waiting readers are told. A lock
-- still held lives exactly as long as its latest holder, and waiting readers
-- are told once no writer holds or waits any more. It publishes only to
-- someone who waits. The fields of dropped holds (st.gone) go here, with
-- the hash when the lock ends free. Returns true when the lock ended up
-- free.
local function after_release(hash, st, now, env)
	local q = q_live(st.f['~q'], now)
	local free = st.readers == 0 and st.writer == nil
	if st.gone and (not free or q ~= '') then
		redis.call('hdel', hash, unpack(st.gone))
	end
	if free then
		if q ~= '' then
			local _, lease = hand_over_write(hash, st, now, q, env, '')
			if lease then
				return false
			end
		end
		wake_readers(hash, st, env)
		redis.call('del', hash)
		end_hold(env.tail, env.op, st.f['~t'], env.ms)
		return true
	end
	update_queue(hash, st, q)
	redis.call('pexpire', hash, st.maxdl - now)
	if st.writer == nil and q == '' then
		wake_readers(hash, st, env)
	end
	return false
end
