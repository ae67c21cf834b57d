-- include: acquire_rare release_rare queue_common listener_common
-- handover_common: the hand-over of an exclusive lock (Lock, and a Lock that
-- is a MultiLock part) to its first queued waiter, prepended after
-- acquire_rare, release_rare and queue_common to the scripts that free
-- a hold (release, abandon, force release) and to every FairLock script (a
-- FairLock's acquire may find the lock free with others queued, and hand it
-- to the first of them). Lock's acquire does without it: it never frees a
-- hold, and every helper a script carries is created again at each call.
-- The walk of the queue is listener_common's, shared with RWLock's
-- writers; the queue is read through a reader: qf_reader (below) for a
-- Lock's, fz_reader (fair_common) for a FairLock's.

-- QF_BATCH is how many positions of a Lock's queue one HMGET reads.
local QF_BATCH = 8

-- qf_reader reads the queue of hash (qv: its ~q) from its head. Its next()
-- returns the next entry, taking it out of the queue (nil: none left);
-- grant(f) writes a hold handed over — field-value list f — in place of
-- the hold of owner field holder (nil: every owner field, see
-- owner_fields) and its last op (~o: the new hold starts without one, see
-- grant_new), with the entries taken out gone and the rest kept; taken()
-- lists the fields of the entries taken out, for a release that frees the
-- lock after nobody took it (see free_record); wake(pub) tells the Clients
-- of the entries left (see wake_queue); none() is called when the walk
-- found nobody to grant, every entry gone. at and e (nil: none) are a
-- position of the queue and its entry, read already by the caller's HMGET
-- (see release_hold): when at is the head, the walk starts from e, and a
-- hand-over to the head's waiter reads no more of the queue.
local function qf_reader(hash, qv, holder, at, e)
	local h, t, c = qf_state(qv)
	local gone = {'~o'}
	local buf, base = {}, h
	if e and tonumber(at) == h then
		buf[1] = e
	end
	local r = {}
	function r.next()
		while c > 0 and h <= t do
			if h - base >= #buf then
				local f = {}
				-- As many as are queued, when fewer: holes are rare.
				for k = h, math.min(h + math.min(QF_BATCH, c) - 1, t) do
					f[#f + 1] = '~#' .. k
				end
				buf, base = redis.call('hmget', hash, unpack(f)), h
			end
			local e, k = buf[h - base + 1], h
			h = h + 1
			if e then
				c = c - 1
				gone[#gone + 1] = '~#' .. k
				gone[#gone + 1] = '~@' .. string.match(e, '^([^%z]*)')
				return e
			end
		end
		return nil
	end
	function r.grant(f)
		if holder then
			gone[#gone + 1] = holder
		else
			for _, k in ipairs(owner_fields(hash)) do
				gone[#gone + 1] = k
			end
		end
		if c > 0 then
			f[#f + 1], f[#f + 2] = '~q', qf_text(h, t, c)
		else
			gone[#gone + 1] = '~q'
		end
		hdel_all(hash, gone)
		redis.call('hset', hash, unpack(f))
	end
	function r.taken()
		return gone
	end
	function r.none()
		-- Every entry was walked: the caller frees the hash with them
		-- (free_record, given taken()).
	end
	function r.wake(pub)
		local rest = qf_reader(hash, qf_text(h, t, c))
		wake_queue(hash, rest.next, Q_ENTRY, pub)
	end
	return r
end

-- hand_over gives the lock in hash, being freed, to the first queued waiter
-- whose Client still listens, in the same call (see first_listener; r is
-- the queue's reader), and writes the hold — count 1, generation = the
-- waiter id, token by the rule of every token (next_token: above last, the
-- freed hold's, above the tail and at least the server's clock, so that a
-- hand-over after Redis came back with older state never repeats a token),
-- the waiter's lease — keeping ~m and the rest of the queue (r.grant).
-- When that lease is shorter than the longest the hold it follows was
-- given (l, its ~l: see queue_common), every waiter left in the queue is
-- told to re-check (r.wake): each may sleep on the longer lease, and would
-- oversleep the new hold's end. A waiter
-- whose id is self (the caller of an acquire that found the lock free) is
-- granted without a message. freed, for a hash that is its own tail (a
-- Lock's, see free_record), is {op, r, n}: the release op (nil: none) to
-- record in the hash's latch, whose ~r and ~n are r and n (see latch_add),
-- with the new hold's fields, in its HSET; the new hold then starts without ~o (see grant_new).
-- It returns true, the token and the waiter's id when the lock was handed
-- over, false when nobody was left to take it (every entry then is out of
-- the queue).
local function hand_over(hash, tail, r, last, m, l, pub, trust, self, freed)
	-- A hold's token (~t, last) was made above the tail's, and only the end
	-- of a hold of this hash writes the tail's: while the hold lives, last
	-- is the larger, and the tail need not be read. A hold without a token
	-- (fencing off, or none: a FairLock's free lock) tells nothing of it.
	local told = tail
	if tonumber(last or 0) > 0 then
		told = nil
	end
	local function fence()
		return next_token(told, last)
	end
	local how, w, lease, fencing, owner, token, text = first_listener(hash, r.next, Q_ENTRY, fence, pub, trust, self)
	if not how then
		r.none()
		return false
	end
	if how == 'self' then
		token, text = 0, '0'
		if fencing == '1' then
			token, text = fence()
		end
	end
	-- Strings, not numbers: a number costs Redis a printf (clock_token).
	local f = {owner, '1', '~g', w, '~t', text or fmt(token), '~l', lease}
	if not freed then
		f[#f + 1], f[#f + 2] = '~o', w
	elseif freed[1] then
		local r, n, pf, p = latch_add(freed[2], freed[3], freed[1])
		f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = '~r', r, '~n', n
		if pf then
			f[#f + 1], f[#f + 2] = pf, p
		end
	end
	if m then
		f[#f + 1], f[#f + 2] = '~m', m
	end
	r.grant(f)
	redis.call('pexpire', hash, lease)
	if tonumber(lease) < tonumber(l or 0) then
		r.wake(pub)
	end
	return true, token, w
end

-- free_hold ends an exclusive hold whose fields are cur ({~g, ~o, ~t, ~q,
-- ~m, ~l[, ~r or ~s]}, as release_hold returns them) and whose owner field
-- is owner (nil: not known): it hands the lock over to a queued waiter
-- (read by r, when ~q says that some may queue), or frees it, leaving its
-- token in the tail (the hash itself when tail is hash, a Lock's or a
-- FairLock's: see free_record); either way the listeners a hold marked (~m) are told on
-- channel ("handed": the lock stays held, by its new holder; "all": it is
-- free) and op (when given: a release, which may be replayed) joins the
-- tail's latch (see release_common).
local function free_hold(hash, channel, op, tail, cur, pub, ms, trust, r, owner)
	local own = tail == hash
	local freed = own and {op, cur[7], cur[8]} or nil
	if cur[4] and hand_over(hash, tail, r, cur[3], cur[5], cur[6], pub, trust, nil, freed) then
		if cur[5] then
			redis.call(pub, channel, 'handed')
		end
		if not own then
			end_hold(tail, op, nil, ms)
		end
		return
	end
	if own then
		free_record(hash, owner, op, ms, cur[7], cur[8], r.taken(), cur[1])
	else
		redis.call('del', hash)
	end
	if cur[5] then
		-- Every listener re-checks ('all'): the one that gets the lock
		-- writes a new hold, which the others' attempts mark again.
		redis.call(pub, channel, 'all')
	end
	if not own then
		end_hold(tail, op, cur[3], ms)
	end
end
