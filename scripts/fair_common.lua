-- include: handover_common queue_common
-- fair_common: the FairLock's queue, prepended to the fair_* scripts after
-- queue_common and handover_common (whose entries, hand-over and release it
-- shares with Lock).
--
-- A FairLock's waiters queue in a sorted set of their own (KEYS[2]), not in
-- the hash: the queue must outlive a hold whose lease runs out without a
-- release, so that the next holder is still the first in line. Its members
-- are the entries of queue_common (waiter id, lease, fencing flag, owner:
-- an attempt rebuilds its own from its arguments, so finding it is one
-- ZSCORE or ZADD NX), scored by arrival number, so that every step is
-- O(log n) in the queue's length. The key lives for the longest waiter
-- timeout of its waiters, renewed by every attempt of a queued waiter (at
-- least every third of its timeout), so it goes by itself once every
-- waiter has died. A dead waiter's entry is skipped by the hand-over (its
-- Client no longer listens), wherever it stands. The hash is its own tail,
-- as a Lock's (see release_common): free, it keeps the last token and the
-- latch, so a free FairLock with nobody queued is that one key.
--
-- The hash's ~q is not the queue (as in a Lock's) but a mark that the queue
-- key may hold waiters: the arrival number given last, set by every waiter
-- that queues behind a hold and kept by a hand-over. A release whose hold
-- has no mark frees the lock without reading the queue key, so an
-- uncontended FairLock costs one command less. Every path that queues a
-- waiter behind a live hold sets it; a queue left behind a hold that ran
-- out (no hash, no mark) is read by the next acquire, which always looks
-- for it.

-- fair_last returns the arrival number given last: mark, the hash's ~q, when
-- the hash has it, else the queue's last score (0 for none).
local function fair_last(qkey, mark)
	local n = tonumber(mark)
	if n then
		return n
	end
	local last = redis.call('zrange', qkey, '-1', '-1', 'withscores')
	return tonumber(last[2] or 0)
end

-- fair_enqueue queues entry e at the end of qkey, after arrival number last
-- (see fair_last), or only renews the key's lifetime when it is queued
-- already: a waiter keeps its place across its attempts. It returns the
-- waiter's place (Q_KEPT or Q_ANEW, see queue_common) and the arrival
-- number given last.
local function fair_enqueue(qkey, last, e, timeout)
	local place = Q_KEPT
	if redis.call('zadd', qkey, 'nx', fmt(last + 1), e) == 1 then
		place, last = Q_ANEW, last + 1
	end
	if redis.call('pttl', qkey) < tonumber(timeout) then
		redis.call('pexpire', qkey, timeout)
	end
	return place, last
end

-- fair_place is where entry e stands: Q_KEPT queued, Q_ABSENT not.
local function fair_place(qkey, e)
	if redis.call('zscore', qkey, e) then
		return Q_KEPT
	end
	return Q_ABSENT
end

-- FZ_BATCH is how many entries of a FairLock's queue one ZRANGE reads
-- (FZ_LAST: the index of the last, as text: see clock_token).
local FZ_BATCH, FZ_LAST = 8, '7'

-- fz_reader reads a FairLock's queue qkey from its head, for hand_over (see
-- qf_reader for what it does): the entries it gives leave the queue with
-- one ZREM per batch read (ZPOPMIN would save that command, but is not in
-- the least-privilege ACL of the README); the hold it grants replaces the
-- hold of owner field holder (nil: every owner field, see owner_fields;
-- false: none, the lock is free) and its ~o, keeping the hash's record (its
-- token and latch, see release_common), marked, when others are left, with
-- last, the arrival number given last (nil: the queue's last score).
local function fz_reader(hash, qkey, last, holder)
	local buf, i, gone = {}, 0, {}
	local function flush()
		if #gone > 0 then
			redis.call('zrem', qkey, unpack(gone))
			gone = {}
		end
	end
	local r = {}
	function r.next()
		if i >= #buf then
			if #buf > 0 and #buf < FZ_BATCH then
				return nil -- the last batch read was the end of the queue
			end
			flush()
			buf, i = redis.call('zrange', qkey, '0', FZ_LAST), 0
		end
		i = i + 1
		gone[#gone + 1] = buf[i]
		return buf[i]
	end
	function r.grant(f)
		flush()
		local gone = {'~o'}
		if i < #buf or #buf == FZ_BATCH then
			if type(last) == 'number' then
				last = fmt(last)
			elseif not last then
				last = redis.call('zrange', qkey, '-1', '-1', 'withscores')[2]
			end
			f[#f + 1], f[#f + 2] = '~q', last
		else
			gone[2] = '~q'
		end
		if holder then
			gone[#gone + 1] = holder
		elseif holder == nil then
			for _, k in ipairs(owner_fields(hash)) do
				gone[#gone + 1] = k
			end
		end
		hdel_all(hash, gone)
		redis.call('hset', hash, unpack(f))
	end
	r.none = flush
	function r.taken()
		-- The queue is a key of its own: the hash has no entries to drop.
		return {}
	end
	function r.wake(pub)
		local rest, j = redis.call('zrange', qkey, '0', '-1'), 0
		wake_queue(hash, function()
			j = j + 1
			return rest[j]
		end, Q_ENTRY, pub)
	end
	return r
end
