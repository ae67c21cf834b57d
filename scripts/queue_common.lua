-- queue_common: the waiters of an exclusive lock (Lock, and a Lock that is a
-- MultiLock part), prepended to the scripts that queue or hand over; those
-- that hand over (release) also get listener_common and handover_common, which use it. The
-- RWLock scripts carry it too, before rw_common: their writers' queue is
-- read and written by the same helpers, given its own entry pattern (see
-- q_pattern).
--
-- The queue lives in the lock hash itself (field ~q), so it costs no key,
-- no TTL of its own and no command to read (the HMGET every script makes
-- anyway), and it ends with the hold: a holder whose lease runs out takes
-- its queue with it, and the waiters, who sleep at most that lease, try
-- again and queue anew. An entry is four NUL-terminated fields: the waiter
-- id (the op id of the waiting acquire, "<client id>:<n>"), its lease in
-- ms, its fencing flag and its owner field. Owners never contain NUL
-- (WithOwner refuses it).
--
-- ~l is the lease the hold was granted with (ms).
--
-- ~m marks a hold that someone listens to on the lock's own channel, told
-- when the lock is freed: a waiting MultiLock (no queued waiter: it needs
-- several locks at once) or an operator's `relock watch`. The mark goes
-- with the hash, so every listener is woken to re-check (and so to mark
-- the next hold): one woken alone would leave the others unmarked.

-- q_pattern returns the Lua pattern of a queue entry of n NUL-terminated
-- fields, the waiter id first: it captures the whole entry, then each
-- field. Each kind of queue keeps the format it has on Redis, which the
-- other versions of relock on the same lock parse: Q_ENTRY (four fields,
-- above) for Lock and FairLock, five for RWLock's writers (see rw_common).
local function q_pattern(n)
	return '(' .. string.rep('([^%z]*)%z', n) .. ')'
end

local Q_ENTRY = q_pattern(4)

-- q_entry returns the entry of the fields given (the waiter id first).
local function q_entry(...)
	return table.concat({...}, '\0') .. '\0'
end

-- q_has reports whether waiter w is queued in q. A plain search first:
-- when "<w>\0" is nowhere in q, w is no entry's id, and a waiter joining a
-- long queue is told so without q being parsed (a search in C, against a
-- walk over every entry in Lua).
local function q_has(q, w)
	if not q or not string.find(q, w .. '\0', 1, true) then
		return false
	end
	for _, id in string.gmatch(q, Q_ENTRY) do
		if id == w then
			return true
		end
	end
	return false
end

-- A busy acquire of a waiter replies, third, where the attempt left the
-- waiter in the queue: Q_KEPT it was queued before the attempt and still
-- is, Q_ANEW the attempt queued it, Q_ABSENT it is not queued. The waiter
-- (see wait.go) trusts a grant without claiming it only while its id has
-- stayed queued since the attempt that first queued it: nothing but the one
-- grant that takes it out of the queue can then be addressed to it.
local Q_KEPT, Q_ANEW, Q_ABSENT = 1, 2, 3

-- q_place returns Q_KEPT when w is in q, else Q_ABSENT.
local function q_place(q, w)
	if q_has(q, w) then
		return Q_KEPT
	end
	return Q_ABSENT
end

-- q_without returns q less the entry of waiter w; pat is the entry pattern
-- (Q_ENTRY when nil).
local function q_without(q, w, pat)
	local out = {}
	for e, id in string.gmatch(q or '', pat or Q_ENTRY) do
		if id ~= w then
			out[#out + 1] = e
		end
	end
	return table.concat(out)
end

-- write_hash_queue writes q as the queue in hash's field ~q, or deletes the
-- field when q is empty.
local function write_hash_queue(hash, q)
	if q == '' then
		redis.call('hdel', hash, '~q')
	else
		redis.call('hset', hash, '~q', q)
	end
end

-- dequeue takes waiter w out of hash's queue q, if it is there.
local function dequeue(hash, q, w)
	if not q or not string.find(q, w .. '\0', 1, true) then
		return
	end
	local rest = q_without(q, w)
	if rest == (q or '') then
		return
	end
	write_hash_queue(hash, rest)
end

-- enqueue adds waiter w at the end of hash's queue q, unless it is queued:
-- a waiter keeps its place across its attempts. It returns Q_KEPT or
-- Q_ANEW.
local function enqueue(hash, q, w, lease, fencing, owner)
	if q_has(q, w) then
		return Q_KEPT
	end
	redis.call('hset', hash, '~q', (q or '') .. q_entry(w, lease, fencing, owner))
	return Q_ANEW
end
