-- include: acquire_common release_common queue_common listener_common
-- handover_common: the hand-over of an exclusive lock (Lock, and a Lock that
-- is a MultiLock part) to its first queued waiter, prepended after
-- acquire_common, release_common and queue_common to the scripts that free
-- a hold (release, abandon, force release) and to every FairLock script (a
-- FairLock's acquire may find the lock free with others queued, and hand it
-- to the first of them). Lock's acquire does without it: it never frees a
-- hold, and every helper a script carries is created again at each call.
-- The walk of the queue is listener_common's, shared with RWLock's
-- writers.

-- store_queue writes q, the queue left after a hand-over, where it lives:
-- the hash's ~q (qkey nil: Lock, written with the new hold) or qkey, a
-- string key of its own (FairLock: its queue outlives a hold whose lease
-- runs out), keeping qkey's TTL.
local function store_queue(qkey, q)
	if not qkey then
		return
	end
	if q == '' then
		redis.call('del', qkey)
	else
		redis.call('set', qkey, q, 'keepttl')
	end
end

-- drop_owner deletes, before the hold of keep is written in hash, the
-- fields of the hold freed that the new one does not overwrite: its
-- owner's count (owner; nil when not known: every owner field, see
-- owner_fields), its last op (~o: the new hold starts without one, see
-- grant_new) and the queue (~q, written again with the new hold when
-- waiters are left).
local function drop_owner(hash, owner, keep)
	if owner then
		if owner ~= keep then
			redis.call('hdel', hash, owner, '~q', '~o')
		else
			redis.call('hdel', hash, '~q', '~o')
		end
		return
	end
	redis.call('hdel', hash, '~q', '~o', unpack(owner_fields(hash)))
end

-- hand_over gives the lock in hash, being freed, to the first queued waiter
-- whose Client still listens, in the same call (see first_listener), and
-- writes the hold — count 1, generation = the waiter id, token by the rule
-- of every token (next_token: above last, the freed hold's, above the tail
-- and at least the server's clock, so that a hand-over after Redis came
-- back with older state never repeats a token), the waiter's lease —
-- keeping ~m and the rest of the queue (see store_queue). When that lease
-- is shorter than the one of the hold it follows (l), every waiter left in
-- the queue is told to re-check (wake_queue): each slept on the longer
-- lease, and would oversleep the new hold's end — after which the queue,
-- in a Lock's hash, is gone with it and nothing is published. A waiter
-- whose id is self (the caller of an acquire that found the lock free) is
-- granted without a message. freed, for a hash that is its own tail (a
-- Lock's, see free_record), is {owner, op, r}: the freed hold's owner field
-- (nil: not known, every owner field goes), deleted, and the release op
-- (nil: none) recorded in the hash's latch r (its ~r, see latch_add), with
-- the new hold's fields, in its HSET. It returns true, the token and the waiter's
-- id when the lock was handed over, false when nobody was left to take it.
local function hand_over(hash, tail, q, last, m, l, pub, trust, qkey, self, freed)
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
	local how, w, lease, fencing, owner, token, text
	how, q, w, lease, fencing, owner, token, text = first_listener(hash, q, Q_ENTRY, fence, pub, trust, self)
	if how == 'self' then
		token, text = 0, '0'
		if fencing == '1' then
			token, text = fence()
		end
	end
	if how then
		-- Strings, not numbers: a number costs Redis a printf (clock_token).
		local f = {owner, '1', '~g', w, '~t', text or fmt(token), '~l', lease}
		if freed then
			drop_owner(hash, freed[1], owner)
			if freed[2] then
				f[#f + 1], f[#f + 2] = '~r', latch_add(freed[3], freed[2])
			end
		else
			-- Another kind's hash keeps ~o (see grant_new).
			redis.call('del', hash)
			f[#f + 1], f[#f + 2] = '~o', w
		end
		if q ~= '' then
			-- A FairLock's hash marks that its queue key holds waiters.
			f[#f + 1], f[#f + 2] = '~q', qkey and '1' or q
		end
		if m then
			f[#f + 1], f[#f + 2] = '~m', m
		end
		redis.call('hset', hash, unpack(f))
		redis.call('pexpire', hash, lease)
		store_queue(qkey, q)
		if tonumber(lease) < tonumber(l or 0) then
			wake_queue(hash, q, Q_ENTRY, pub)
		end
		return true, token, w
	end
	store_queue(qkey, '')
	return false
end

-- free_hold ends an exclusive hold whose fields are cur ({~g, ~o, ~t, ~q,
-- ~m, ~l[, ~r or ~s]}, as release_hold returns them) and whose owner field is
-- owner (nil: not known): it hands the lock over to a queued waiter (the
-- hash's ~q, or the string qkey when given and ~q marks it as holding
-- waiters, see fair_common), or frees it, leaving its token in the tail
-- (the hash itself when tail is hash, a Lock's: see free_record); either
-- way the listeners a hold marked (~m) are told on channel ("handed": the
-- lock stays held, by its new holder; "all": it is free) and op (when
-- given: a release, which may be replayed) joins the tail's latch (see
-- release_common).
local function free_hold(hash, channel, op, tail, cur, pub, ms, trust, qkey, owner)
	local q = cur[4]
	if qkey and q then
		q = redis.call('get', qkey)
	end
	local own = tail == hash
	local freed = own and {owner, op, cur[7]} or nil
	if q and hand_over(hash, tail, q, cur[3], cur[5], cur[6], pub, trust, qkey, nil, freed) then
		if cur[5] then
			redis.call(pub, channel, 'handed')
		end
		if not own then
			end_hold(tail, op, nil, ms)
		end
		return
	end
	if own then
		free_record(hash, owner, op, ms, cur[7])
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
