-- include: handover_common queue_common
-- fair_common: the FairLock's queue, prepended to the fair_* scripts after
-- queue_common and handover_common (whose entries, hand-over and release it
-- shares with Lock).
--
-- A FairLock's waiters queue in a string key of their own (KEYS[2], the
-- entries of queue_common, oldest first), not in the hash: the queue must
-- outlive a hold whose lease runs out without a release, so that the next
-- holder is still the first in line. The key lives for the longest waiter
-- timeout of its waiters, renewed by every attempt of a queued waiter (at
-- least every third of its timeout), so it goes by itself once every waiter
-- has died. A dead waiter's entry is skipped by the hand-over (its Client no
-- longer listens), wherever it stands.
--
-- The hash's ~q is not the queue (as in a Lock's) but a mark, '1', that the
-- queue key may hold waiters: set by the first waiter that queues behind a
-- hold, and by a hand-over that leaves others queued. A release whose hold
-- has no mark frees the lock without reading the queue key, so an
-- uncontended FairLock costs one command less. Every path that queues a
-- waiter behind a live hold sets it; a queue left behind a hold that ran
-- out (no hash, no mark) is read by the next acquire, which always reads it.

-- fair_enqueue queues waiter w at the end of qkey (q: its value), or only
-- renews the key's lifetime when w is queued already: a waiter keeps its
-- place across its attempts. It returns the queue and the waiter's place
-- (Q_KEPT or Q_ANEW, see queue_common).
local function fair_enqueue(qkey, q, w, lease, fencing, owner, timeout)
	local ttl = redis.call('pttl', qkey)
	if q_has(q, w) then
		if ttl < timeout then
			redis.call('pexpire', qkey, timeout)
		end
		return q, Q_KEPT
	end
	q = (q or '') .. q_entry(w, lease, fencing, owner)
	redis.call('set', qkey, q, 'px', math.max(ttl, timeout))
	return q, Q_ANEW
end

-- fair_dequeue takes waiter w out of qkey (q: its value), if it is there,
-- and returns the rest of the queue.
local function fair_dequeue(qkey, q, w)
	local rest = q_without(q, w)
	if rest ~= (q or '') then
		store_queue(qkey, rest)
	end
	return rest
end
