-- queue_common: the waiters of an exclusive lock (Lock, and a Lock that is a
-- MultiLock part), prepended to the scripts that queue or hand over; those
-- that hand over (release) also get handover_common, which uses it.
--
-- The queue lives in the lock hash itself (field ~q), so it costs no key,
-- no TTL of its own and no command to read (the HMGET every script makes
-- anyway), and it ends with the hold: a holder whose lease runs out takes
-- its queue with it, and the waiters, who sleep at most that lease, try
-- again and queue anew. An entry is four NUL-terminated fields: the waiter
-- id (the op id of the waiting acquire, "<client uuid>:<n>"), its lease in
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

local Q_ENTRY = '(([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z)'

local function q_has(q, w)
	for _, id in string.gmatch(q or '', Q_ENTRY) do
		if id == w then
			return true
		end
	end
	return false
end

-- q_without returns q less the entry of waiter w.
local function q_without(q, w)
	local out = {}
	for e, id in string.gmatch(q or '', Q_ENTRY) do
		if id ~= w then
			out[#out + 1] = e
		end
	end
	return table.concat(out)
end

-- dequeue takes waiter w out of hash's queue q, if it is there.
local function dequeue(hash, q, w)
	if not q then
		return
	end
	local rest = q_without(q, w)
	if rest == (q or '') then
		return
	end
	q = rest
	if q == '' then
		redis.call('hdel', hash, '~q')
	else
		redis.call('hset', hash, '~q', q)
	end
end

-- enqueue adds waiter w at the end of hash's queue q, unless it is queued:
-- a waiter keeps its place across its attempts.
local function enqueue(hash, q, w, lease, fencing, owner)
	if not q_has(q, w) then
		redis.call('hset', hash, '~q', (q or '') .. w .. '\0' .. lease .. '\0' .. fencing .. '\0' .. owner .. '\0')
	end
end
