-- queue_common: the waiters of an exclusive lock (Lock, and a Lock that is a
-- MultiLock part), prepended to the scripts that queue or hand over; those
-- that hand over (release) also get listener_common and handover_common, which use it. The
-- RWLock and FairLock scripts carry it too: an entry's format (q_pattern,
-- q_entry) and the place a busy attempt replies are shared.
--
-- A Lock's queue lives in the lock hash itself, so it costs no key, no TTL
-- of its own and no command to read its state (the HMGET every script
-- makes anyway), and it ends with the hold: a holder whose lease runs out
-- takes its queue with it, and the waiters, who sleep at most that lease,
-- try again and queue anew. Each waiter is two fields, so that every step
-- is O(1) in the queue's length:
--   ~q      "<head> <last> <count>": the position of the first entry (a
--           lower bound: positions before it are free), the position given
--           last, and how many waiters are queued; absent when none is
--   ~#<k>   the entry at position k: four NUL-terminated fields, the waiter
--           id (the op id of the waiting acquire, "<client id>:<n>"), its
--           lease in ms, its fencing flag and its owner field
--   ~@<id>  the position of waiter id's entry
-- A waiter that leaves leaves a hole, which the hand-over steps over.
-- Owners never contain NUL (WithOwner refuses it), and every reserved field
-- starts with '~', which no owner field does.
--
-- ~l is the longest lease the hold has been given (ms): its grant's, raised
-- by a longer re-entry or renewal (reenter_hold, lock_renew). Every PEXPIRE
-- of a held hash is at most ~l, so the PTTL a busy attempt tells a waiter
-- to sleep never outlasts now + ~l, and a hand-over to a shorter lease than
-- ~l wakes the waiters left (hand_over, handover_common). A claim's or a
-- replay's PEXPIRE (replay_or_read) is the lease of the op it repeats,
-- which ~l took in when that op applied.
--
-- ~m marks a hold that someone listens to on the lock's own channel, told
-- when the lock is freed: a waiting MultiLock (no queued waiter: it needs
-- several locks at once) or an operator's `relock watch`. The mark goes
-- with the hash, so every listener is woken to re-check (and so to mark
-- the next hold): one woken alone would leave the others unmarked.

-- q_pattern returns the Lua pattern of a queue entry of n NUL-terminated
-- fields, the waiter id first: it captures the whole entry, then each
-- field. Each kind of queue keeps the entry format it has on Redis:
-- Q_ENTRY (four fields, above) for Lock, FairLock and RWLock's writers.
local function q_pattern(n)
	return '(' .. string.rep('([^%z]*)%z', n) .. ')'
end

local Q_ENTRY = q_pattern(4)

-- q_entry returns the entry of the fields given (the waiter id first).
local function q_entry(...)
	return table.concat({...}, '\0') .. '\0'
end

-- A busy acquire of a waiter replies, third, where the attempt left the
-- waiter in the queue: Q_KEPT it was queued before the attempt and still
-- is, Q_ANEW the attempt queued it, Q_ABSENT it is not queued. The waiter
-- (see wait.go) trusts a grant without claiming it only while its id has
-- stayed queued since the attempt that first queued it: nothing but the one
-- grant that takes it out of the queue can then be addressed to it.
local Q_KEPT, Q_ANEW, Q_ABSENT = 1, 2, 3

-- qf_state reads a Lock's ~q: head, last position and count (1, 0, 0 for
-- none, or for a value of another format).
local function qf_state(v)
	local h, t, c = string.match(v or '', '^(%d+) (%d+) (%d+)$')
	if not h then
		return 1, 0, 0
	end
	return tonumber(h), tonumber(t), tonumber(c)
end

-- qf_text writes a Lock's ~q. Integers below 2^47 print in full.
local function qf_text(h, t, c)
	return h .. ' ' .. t .. ' ' .. c
end

-- enqueue adds waiter w at the end of the queue of hash (qv: its ~q, at:
-- w's ~@ field, read by the caller's HMGET), unless it is queued: a waiter
-- keeps its place across its attempts. It returns Q_KEPT or Q_ANEW, and
-- w's position.
local function enqueue(hash, qv, at, w, lease, fencing, owner)
	if at then
		return Q_KEPT, tonumber(at)
	end
	local h, t, c = qf_state(qv)
	t = t + 1
	if c == 0 then
		h = t
	end
	redis.call('hset', hash, '~q', qf_text(h, t, c + 1), '~#' .. t, q_entry(w, lease, fencing, owner), '~@' .. w, tostring(t))
	return Q_ANEW, t
end

-- dequeue takes waiter w (at: its ~@ field) out of the queue of hash (qv:
-- its ~q), if it is there.
local function dequeue(hash, qv, at, w)
	if not at then
		return
	end
	local h, t, c = qf_state(qv)
	local k = tonumber(at)
	if c <= 1 then
		redis.call('hdel', hash, '~q', '~#' .. k, '~@' .. w)
		return
	end
	if k == h then
		h = h + 1
	end
	redis.call('hdel', hash, '~#' .. k, '~@' .. w)
	redis.call('hset', hash, '~q', qf_text(h, t, c - 1))
end
