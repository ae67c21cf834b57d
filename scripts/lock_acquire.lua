-- include: acquire_common
-- lock_acquire: take or re-enter a reentrant exclusive lock, or queue for it.
--
-- KEYS[1]  lock hash: owner -> hold count; ~g generation, ~o last op,
--          ~t fencing token, ~l longest lease given, ~q, ~#<k> and ~@<id>
--          the queued waiters, ~m a MultiLock waits (see queue_common),
--          and the record a free lock keeps (~t, and ~r the latch: see
--          release_common); the lease as its PTTL while held (a hash
--          without ~g is free)
-- ARGV[1]  owner ("<client id>:<owner id>")
-- ARGV[2]  op id of this request; a waiter sends the same one at each of
--          its attempts, and it is the waiter's id in the queue
-- ARGV[3]  generation the caller holds ("" : a new acquisition)
-- ARGV[4]  lease in milliseconds
-- ARGV[5]  "1" to hand out a fencing token on a new acquisition, "0" not to
-- ARGV[6]  "1" to queue the caller when the lock is held (it waits for a
--          hand-over, see queue_common), absent or "" not to (RedLock)
--
-- Returns {1, token, count}  acquired (count: the owner's holds now)
--         {0, pttl, place, at}  held by another owner; pttl is its lease
--                            left, place where the caller stands in the
--                            queue (Q_KEPT, Q_ANEW or Q_ABSENT, see
--                            queue_common), at its position (0: none)
--         {-1, 0}            the caller's generation no longer holds: lost
--
-- Idempotent under replay: a request whose op id is the last applied already
-- ran — or was granted by a hand-over, which names the hold after the
-- waiter's op id — and gets its lease from now. A new acquisition that finds the owner's own field under
-- another generation (a hold the Client has ended already, or one resumed
-- with WithOwner) takes it over as a new hold, with a new token.
local hash, owner, op = KEYS[1], ARGV[1], ARGV[2]
local done, cur = replay_or_read(hash, owner, op, ARGV[3], ARGV[4], '~@' .. op)
if done then
	return done
end
if cur and not cur[5] and not cur[8] and cur[9] ~= op and (cur[1] or not cur[4]) then
	-- Free (or the owner's own leftover), nobody queued, no void marks, and
	-- not a copy of the hold just freed: the common acquire, which needs
	-- none of the rarer helpers, made only below.
	return {1, grant_new(hash, owner, op, ARGV[4], ARGV[5], cur[3]), 1}
end
-- include here: acquire_rare queue_common void_common
if not cur then
	return reenter_hold(hash, owner, op, ARGV[3], ARGV[4])
end
if cur[9] == op or (cur[8] and void_claimed(hash, cur[8], op)) then
	-- A copy of the request that started the hold the last release freed
	-- (go-redis sent it again when its reply was late, and the first copy
	-- arrives only now), or a request its Client has settled already
	-- (void_common): nobody waits for this reply.
	return {0, redis.call('pttl', hash), Q_ABSENT, 0}
end
if not cur[1] and cur[4] then
	local place, at = Q_ABSENT, 0
	if cur[6] then
		place = Q_KEPT
	end
	if ARGV[6] == '1' then
		place, at = enqueue(hash, cur[5], cur[6], op, ARGV[4], ARGV[5], owner)
	end
	return {0, redis.call('pttl', hash), place, at}
end
dequeue(hash, cur[5], cur[6], op)
return {1, grant_new(hash, owner, op, ARGV[4], ARGV[5], cur[3]), 1}
