-- include: acquire_rare release_rare queue_common listener_common
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
--   ~q         "<last> <deadline> <head> <count>" while writers queue (below)
--   ~r         set while readers wait: the next script that lets readers in
--              tells them, once, on the readers' channel
--   ~s         the tail's latch slot written last, once a write grant has
--              read the tail (see rw_token)
--   ~w         the latest end a waiter may have been told, kept while the
--              lock ends sooner by less than WAKE_SLACK (wake_if_sooner)
-- The hash's PTTL is the latest deadline, so it disappears with its last
-- holder, and its queue with it (the waiters, who sleep at most until then,
-- try again and queue anew). A holder whose deadline has passed (its
-- process died) is evicted by the next script that looks. Times come from
-- the server (TIME), so clock skew between processes does not matter.
--
-- The waiting writers queue in a sorted set beside the hash (env.q, the
-- scripts' KEYS "queue"), not in it: every script reads the whole hash, and
-- the queue would make that grow with it. Its members are queue_common's
-- entries (waiter id — the op id its attempts send, "<client id>:<n>" —,
-- lease, fencing flag, owner: an attempt rebuilds its own from its
-- arguments, so finding it is one ZADD NX or ZSCORE), scored by arrival,
-- so that every step is O(log n) in the queue's length. The hash's ~q marks
-- that writers queue, with the arrival number given last, the queue key's
-- deadline (server ms), its head and the count of its entries (see
-- wq_mark), so that a script
-- learns all that from the HGETALL it makes anyway, and an uncontended
-- lock never reads the queue key. The queue is a claim: while it lives
-- (mark deadline not passed), new readers wait; every attempt of a queued
-- writer keeps the key alive for its waiter timeout (see wq_put), so the
-- claim of writers that all died lapses within that. The script that frees
-- the lock hands the write hold to the first writer whose Client still
-- listens (see hand_over_write). A hash that expires takes the mark with
-- it, and the queue left is dropped by the next writer that queues, or by
-- the end of the next hold.

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
local function forget(st, kind, owner)
	local cf, df, gf, of = fields(kind, owner)
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
-- live read hold), writer (owner of the live write hold or nil), maxdl
-- (the latest live deadline, 0 for none) and was, maxdl as the script
-- found it: the latest end any waiter may have been told (see
-- wake_if_sooner).
local function scan(hash, now, evict)
	local all = redis.call('hgetall', hash)
	local st = {f = {}, dls = {}}
	for i = 1, #all, 2 do
		st.f[all[i]] = all[i + 1]
	end
	layout_check(st.f['~v'], hash)
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
	st.was = st.maxdl
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
	-- (WithReplicas) covers the hand-over's writes (see replay_or_read in acquire_common).
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

-- wq_mark reads the mark of the writers' queue (~q, see above) into a
-- table: last, the arrival number given last; dl, the queue key's deadline
-- (server ms); head, the arrival number where the queue starts (the
-- entries scored below it were walked past: see wq_reader); c, how many
-- writers are queued. nil when there is none.
local function wq_mark(st)
	local last, dl, head, c = string.match(st.f['~q'] or '', '^(%d+) (%d+) (%d+) (%d+)$')
	if not last then
		return nil
	end
	return {last = tonumber(last), dl = tonumber(dl), head = tonumber(head), c = tonumber(c)}
end

-- wq_set writes mark m into st's copy and returns its text, or nil when
-- nobody is queued: the caller writes it with its own HSET, or deletes ~q.
local function wq_set(st, m)
	if m.c <= 0 then
		st.f['~q'] = nil
		return nil
	end
	st.f['~q'] = m.last .. ' ' .. m.dl .. ' ' .. m.head .. ' ' .. m.c
	return st.f['~q']
end

-- wq_write writes mark m of the queue in hash (see wq_set).
local function wq_write(hash, st, m)
	local v = wq_set(st, m)
	if v then
		redis.call('hset', hash, '~q', v)
	else
		redis.call('hdel', hash, '~q')
	end
end

-- wq_live tells whether writers are queued (a live claim): the mark is
-- there and its deadline has not passed. A mark past its deadline (its
-- writers died: the queue key expired with it) is deleted.
local function wq_live(hash, st, now)
	local m = wq_mark(st)
	if m and m.dl <= now then
		redis.call('hdel', hash, '~q')
		st.f['~q'] = nil
		return false
	end
	return m ~= nil
end

-- wq_score is the arrival number of entry e while it is queued (at or
-- after the head of mark m), else nil.
local function wq_score(env, m, e)
	local sc = tonumber(redis.call('zscore', env.q, e) or -1)
	if sc >= m.head then
		return sc
	end
	return nil
end

-- wq_put queues writer entry e (see queue_common: waiter id, lease,
-- fencing flag, owner) at the end of the queue env.q, or keeps its place
-- when it is queued: ZADD NX scored by arrival. timeout is the writer's
-- waiter timeout (text): the queue key lives at least that long after each
-- of its writers' attempts, pushed (and the mark written) once a third of
-- it has run, so that most attempts write one field at most. A queue
-- without a live mark is a leftover (of a hash that expired with writers
-- queued, or of writers that all died): it is deleted first. It returns
-- Q_ANEW or Q_KEPT.
local function wq_put(hash, st, env, now, e, timeout)
	local m = wq_mark(st)
	if not m or m.dl <= now then
		redis.call('del', env.q)
		m = {last = 0, dl = 0, head = 1, c = 0}
	end
	local place = Q_KEPT
	if redis.call('zadd', env.q, 'nx', fmt(m.last + 1), e) == 1 then
		place = Q_ANEW
	elseif not wq_score(env, m, e) then
		-- Walked past and granted (see wq_reader), then lost: queued anew.
		redis.call('zadd', env.q, 'xx', fmt(m.last + 1), e)
		place = Q_ANEW
	end
	if place == Q_ANEW then
		m.last, m.c = m.last + 1, m.c + 1
	end
	local t = tonumber(timeout)
	local push = 3 * (m.dl - now) < 2 * t
	if push then
		redis.call('pexpire', env.q, timeout)
		m.dl = now + t
	end
	if push or place == Q_ANEW then
		wq_write(hash, st, m)
	end
	return place
end

-- wq_place is where entry e stands: Q_KEPT queued, Q_ABSENT not.
local function wq_place(st, env, e)
	local m = wq_mark(st)
	if m and wq_score(env, m, e) then
		return Q_KEPT
	end
	return Q_ABSENT
end

-- wq_remove takes entry e out of the queue, if it is there; true when it
-- was. The mark counts it out (st only: the caller writes it).
local function wq_remove(st, env, e)
	local m = wq_mark(st)
	if not m or not wq_score(env, m, e) then
		return false
	end
	redis.call('zrem', env.q, e)
	m.c = m.c - 1
	wq_set(st, m)
	return true
end

-- WQ_BATCH is how many entries one ZRANGEBYSCORE of the queue reads.
local WQ_BATCH = 8

-- wq_reader reads the queue from its head, for first_listener: next()
-- gives the next entry (nil: none left), moving the mark's head past it.
-- done(granted) settles the walk and returns the mark left: the entries
-- skipped leave the queue (ZREM, rare: a writer skipped is one whose
-- Client no longer listens), the one granted (granted true: the last
-- given) stays, below the head, until a sweep takes the entries below the
-- head out, once the head has passed WQ_BATCH more (ZREMRANGEBYSCORE), so
-- that a hand-over costs one read of the queue and, on average, an eighth
-- of a write. wake() lists the entries left.
local function wq_reader(hash, st, env)
	local m = wq_mark(st)
	local from = m.head
	local buf, i, given = {}, 0, {}
	local r = {}
	function r.next()
		if m.c <= 0 then
			return nil
		end
		if 2 * i >= #buf then
			buf, i = redis.call('zrangebyscore', env.q, fmt(m.head), '+inf', 'withscores', 'limit', '0', tostring(math.min(WQ_BATCH, m.c))), 0
			if #buf == 0 then
				m.c = 0
				return nil
			end
		end
		i = i + 1
		local e = buf[2 * i - 1]
		m.head, m.c = tonumber(buf[2 * i]) + 1, m.c - 1
		given[#given + 1] = e
		return e
	end
	function r.done(granted)
		if granted then
			given[#given] = nil
		end
		if #given > 0 then
			redis.call('zrem', env.q, unpack(given))
		end
		if math.floor((m.head - 1) / WQ_BATCH) > math.floor((from - 1) / WQ_BATCH) then
			redis.call('zremrangebyscore', env.q, '-inf', '(' .. fmt(m.head))
		end
		return m
	end
	function r.wake()
		local rest, j = redis.call('zrangebyscore', env.q, fmt(m.head), '+inf'), 0
		wake_queue(hash, function()
			j = j + 1
			return rest[j]
		end, Q_ENTRY, env.pub)
	end
	return r
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

-- WAKE_SLACK (ms) is how much sooner than a waiter may have been told the
-- lock may come to end before wake_if_sooner wakes the waiters: the release
-- of the reader with the latest deadline shortens the lock's end by a few
-- milliseconds at a time, and waking every waiter at each would make a
-- busy RWLock's waiters retry at every such release.
local WAKE_SLACK = 200

-- wake_if_sooner keeps the promise that no waiter sleeps past what blocks
-- it. Every busy reply tells a waiter an end at most the lock's latest
-- deadline then (a writer: the latest deadline; a reader: the write hold's,
-- or the claim's), and nothing is published when a lease runs out. So a
-- script that leaves the lock ending sooner than any end a waiter may have
-- been told (told: st.was, the latest deadline the script found, or ~w,
-- the latest one since the waiters were last woken, when it was later) by
-- more than WAKE_SLACK — a hand-over to a shorter lease, the end of the
-- hold with the latest deadline, a downgrade's end of the write hold —
-- tells the writers queued and the readers waiting (~r) to re-check, and
-- sleep on what blocks them now. A smaller shortening keeps told in ~w,
-- so that shortenings that add up wake them too; a waiter then sleeps at
-- most WAKE_SLACK past the end. ~w goes once nobody waits, or the lock
-- ends at told or later. r, when given, is the reader of the queue's walk
-- (hand_over_write), which has passed the writer granted.
local function wake_if_sooner(hash, st, env, r)
	local kept = tonumber(st.f['~w'] or 0)
	local told = math.max(kept, st.was)
	local waiting = wq_mark(st) or st.f['~r']
	if waiting and st.maxdl < told - WAKE_SLACK then
		if wq_mark(st) then
			(r or wq_reader(hash, st, env)).wake()
		end
		wake_readers(hash, st, env)
		told = st.maxdl
	end
	st.was = st.maxdl
	if waiting and st.maxdl < told then
		if told ~= kept then
			st.f['~w'] = fmt(told)
			redis.call('hset', hash, '~w', st.f['~w'])
		end
	elseif kept > 0 then
		st.f['~w'] = nil
		redis.call('hdel', hash, '~w')
	end
end

-- rw_token returns a new write hold's token: above the hash's ~t, and
-- above the tail's unless ~t is a token already (only the end of the hash
-- writes the tail's ~t, so while the hash lives its own is the larger).
-- The tail's read also gives its latch's last slot (~s; '' for none yet),
-- which the hash then carries (st.pending_s, written by carry_slot with the
-- hold) so that a release writes the next slot without reading the tail
-- first: every release that writes the latch while the hash lives writes
-- the hash's ~s too (see rw_release), so it stays exact.
local function rw_token(st, tail)
	local last = tonumber(st.f['~t'] or 0)
	if last > 0 then
		return next_token(nil, last, clock_us)
	end
	local t = redis.call('hmget', tail, '~t', '~s')
	if not st.f['~s'] then
		st.pending_s = t[2] or ''
	end
	return next_token(nil, math.max(last, tonumber(t[1] or 0)), clock_us)
end

-- carry_slot adds to a grant's field-value list the latch slot rw_token
-- read, when the hash does not carry one yet.
local function carry_slot(st, extra)
	if st.pending_s and not st.f['~s'] then
		extra[#extra + 1], extra[#extra + 2] = '~s', st.pending_s
		st.f['~s'] = st.pending_s
	end
	st.pending_s = nil
end

-- hand_over_write gives the write hold of the lock in hash, which nobody
-- holds (state st), to the first queued writer whose Client still listens,
-- in the same call (see first_listener; its token is a new one above ~t,
-- and above the tail unless ~t is a token already: only the end of the
-- hash writes the tail's), and writes the hold — count 1, generation and
-- last op = the waiter id, deadline now + the waiter's lease — with the
-- mark of the writers left. Writers skipped leave the queue. The entry of
-- waiter self (the caller of an acquire, "" for none) stops the hand-over.
-- A hold that ends sooner than the lock did wakes the writers left and the
-- waiting readers (wake_if_sooner).
--
-- It returns the granted lease, or 'self' when the caller's own entry came
-- first (out of the queue now: st.f['~q'] is the mark the caller writes),
-- or nil when nobody was handed the lock (the queue is then empty).
local function hand_over_write(hash, st, now, env, self)
	local function fence()
		return rw_token(st, env.tail)
	end
	local r = wq_reader(hash, st, env)
	local how, w, lease, _, owner, token = first_listener(hash, r.next, Q_ENTRY, fence, env.pub, env.trust, self)
	local mark = wq_set(st, r.done(how ~= nil))
	if how == 'self' then
		return how -- the caller writes the mark, with its hold
	end
	if not how then
		redis.call('hdel', hash, '~q')
		return nil
	end
	lease = tonumber(lease)
	local extra = {'~t', fmt(token)}
	if mark then
		extra[#extra + 1], extra[#extra + 2] = '~q', mark
	else
		redis.call('hdel', hash, '~q')
	end
	if env.slot then
		-- The release's latch slot, written with the new hold (see
		-- rw_token).
		extra[#extra + 1], extra[#extra + 2] = '~s', env.slot
		env.carried = true
	end
	carry_slot(st, extra)
	grant(hash, st, 'w', owner, w, lease, now, extra)
	st.f['~t'] = fmt(token)
	wake_if_sooner(hash, st, env, r)
	return lease
end

-- after_release settles the lock once holds may have ended (a release, an
-- eviction, a force-release, a writer that gave up): st is its state after
-- the change. A free lock is handed over to the first queued writer that
-- listens; failing that, its hash goes, with its queue key (the tail keeps
-- its last write token, and env.op, when given, in the latch, for the
-- latch's time, env.ms: see release_common) and waiting readers are told.
-- A lock still held lives exactly as long as its latest holder, and
-- waiting readers are told once no writer holds or waits any more. It
-- publishes only to someone who waits. The fields of dropped holds
-- (st.gone) go here, with the hash when the lock ends free. Returns true
-- when the lock ended up free.
local function after_release(hash, st, now, env)
	local live = wq_live(hash, st, now)
	local free = st.readers == 0 and st.writer == nil
	if st.gone and (not free or live) then
		redis.call('hdel', hash, unpack(st.gone))
	end
	if free then
		if live and hand_over_write(hash, st, now, env, '') then
			return false
		end
		wake_readers(hash, st, env)
		redis.call('del', hash) -- one key per command (see sema_reclaim)
		redis.call('del', env.q)
		end_hold(env.tail, env.op, st.f['~t'], env.ms, st.f['~s'])
		return true
	end
	redis.call('pexpire', hash, st.maxdl - now)
	if st.writer == nil and not live then
		wake_readers(hash, st, env)
	end
	wake_if_sooner(hash, st, env)
	return false
end
