-- include: acquire_common
-- fair_acquire: take or re-enter a fair lock, or queue up for it.
--
-- KEYS[1]  lock hash: as lock_acquire's (owner -> count, ~g, ~o, ~t, ~l,
--          ~m, and the record of a free lock: ~t, ~r, ~p, ~n), but ~q only
--          marks that the queue may hold waiters, and holds the arrival
--          number given last (see fair_common)
-- KEYS[2]  queue: the waiters' sorted set, by arrival (see fair_common)
-- ARGV[1]  owner
-- ARGV[2]  op id of this request; a waiter sends the same one at each of
--          its attempts, and it is the waiter's id in the queue
-- ARGV[3]  generation the caller holds ("" : a new acquisition)
-- ARGV[4]  lease in milliseconds
-- ARGV[5]  "1" to hand out a fencing token on a new acquisition, "0" not to
-- ARGV[6]  "1" to queue the caller when it cannot have the lock now (it
--          waits for a hand-over), "0" not to (a TryLock that does not wait)
-- ARGV[7]  waiter timeout in milliseconds: the queue's lifetime unless a
--          waiter's attempt renews it
-- ARGV[8]  publish command: "publish" or "spublish"
-- ARGV[9]  as lock_release's ARGV[7]
--
-- Returns {1, token, count}  acquired
--         {0, pttl, place}   not the caller's turn (it is queued, if it
--                            asked to be); pttl is the holder's remaining
--                            lease, place as lock_acquire's
--         {-1, 0}            the caller's generation no longer holds: lost
--
-- A free lock with waiters queued (its last holder's lease ran out) goes
-- to the first of them that still listens, as a release would hand it
-- over: never to a newcomer. Idempotent under replay, as lock_acquire.
local hash, owner, op = KEYS[1], ARGV[1], ARGV[2]
local done, cur = replay_or_read(hash, owner, op, ARGV[3], ARGV[4])
if done then
	return done
end
local held = cur and cur[4] and not cur[1]
if cur and not held and not cur[5] and not cur[8] and cur[9] ~= op and (cur[3] or cur[4] or redis.call('exists', KEYS[2]) == 0) then
	-- Free (or the owner's own leftover), nobody queued, no void marks
	-- (void_common), not a copy of the hold just freed: the common
	-- acquire, which needs none of the queue's or hand-over's helpers, made
	-- only below. A hash that Redis still has (a hold, or a free lock's
	-- record: ~t) and no ~q says nobody queues without the queue's EXISTS:
	-- a waiter queues only behind a hold, marking it (~q), and a release
	-- or a hand-over that leaves the queue empty takes the mark away. Only
	-- a lock whose hash is gone (its lease ran out, or Redis forgot) may
	-- have waiters that no mark tells of.
	return {1, grant_new(hash, owner, op, ARGV[4], ARGV[5], cur[3]), 1}
end
-- include here: acquire_rare queue_common handover_common fair_common void_common
if not cur then
	return reenter_hold(hash, owner, op, ARGV[3], ARGV[4])
end
if cur[9] == op or (cur[8] and void_claimed(hash, cur[8], op)) then
	-- A copy of the request that started the hold the last release freed,
	-- or a request its Client has settled already (void_common): see
	-- lock_acquire.
	return {0, redis.call('pttl', hash), Q_ABSENT}
end
local e = q_entry(op, ARGV[4], ARGV[5], owner)
local place, last = Q_ABSENT, nil
if ARGV[6] == '1' then
	place, last = fair_enqueue(KEYS[2], fair_last(KEYS[2], cur[5]), e, ARGV[7])
else
	place = fair_place(KEYS[2], e)
end
if held then
	if place == Q_ANEW then
		redis.call('hset', hash, '~q', fmt(last))
	end
	return {0, redis.call('pttl', hash), place}
end
if not cur[1] then
	-- Free, and others queue: the first that still listens has it.
	local handed, token, w = hand_over(hash, hash, fz_reader(hash, KEYS[2], last, false), nil, nil, nil, ARGV[8], ARGV[9], op)
	if w == op then
		return {1, token, 1}
	end
	if handed then
		return {0, redis.call('pttl', hash), place}
	end
	-- Nobody listened: the queue is gone.
end
-- Free with nobody in line, or a leftover of the owner's own (a hold its
-- Client ended already, or one resumed with WithOwner): taken over.
local token = grant_new(hash, owner, op, ARGV[4], ARGV[5], cur[3])
redis.call('zrem', KEYS[2], e)
local rest = redis.call('zrange', KEYS[2], '-1', '-1', 'withscores')[2]
if rest then
	redis.call('hset', hash, '~q', rest)
end
return {1, token, 1}
