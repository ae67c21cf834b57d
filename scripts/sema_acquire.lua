-- include: acquire_rare sema_common void_common
-- sema_acquire: take n permits of a Semaphore, or queue for them.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  its holds by deadline (":sema:d")
-- KEYS[3]  its queue (":sema:q")
-- KEYS[4]  its claims by deadline (":sema:c")
-- ARGV[1]  owner
-- ARGV[2]  op id of this request: the generation of the hold it starts; a
--          waiter sends the same one at each attempt, its id in the queue
-- ARGV[3]  permits asked for
-- ARGV[4]  capacity this Semaphore was made with
-- ARGV[5]  lease in milliseconds
-- ARGV[6]  "1" to queue the caller when it cannot have the permits now
-- ARGV[7]  waiter timeout in milliseconds: the claim's lifetime
-- ARGV[8]  publish command: "publish" or "spublish"
-- ARGV[9]  "1" to trust every PUBLISH (classic pub/sub on a Cluster)
--
-- Returns {1, 0, n}      acquired (a semaphore has no fencing token)
--         {0, retryIn, place}  not now (queued, if asked); retryIn is the
--                        time to the earliest hold's deadline in ms, -1 for
--                        none or for a waiter behind the head (see
--                        sema_retry); place where the attempt left the
--                        waiter: 1 queued before and still, 2 queued by this
--                        attempt, 3 not queued (queue_common's Q_KEPT,
--                        Q_ANEW, Q_ABSENT, which the wait loop reads)
--         {-3, cap}      Redis records another capacity: nothing changed
--         {-4, cap}      n is more than the capacity cap: nothing changed
--
-- Idempotent under replay: a request whose op already holds (a replay, or
-- the claim of a grant that reached the waiter late) is acquired again,
-- its lease counted from now, before any check: a replay gets the first
-- run's reply even when the capacity changed in between. A newcomer never
-- passes a waiter: it takes permits only when nobody is left in the queue
-- after the waiters the free permits serve (they are handed theirs in the
-- same call). Every step costs O(log n) in holders and waiters, but for the
-- holds and claims that ended, each reclaimed once.
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], c = KEYS[4]}
local owner, op = ARGV[1], ARGV[2]
local n, cap, lease = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local st = sema_open(k, math.floor(now_us() / 1000))
if st.cap then
	local dl = tonumber(redis.call('zscore', k.d, op))
	if dl then
		if st.now + lease > dl then
			redis.call('zadd', k.d, st.now + lease, op)
			sema_store(st)
		end
		return {1, 0, (sema_hold(redis.call('hget', k.h, 'h:' .. op) or (n .. ':')))}
	end
end
if st.x then
	local voided
	voided, st.x = void_claimed(k.h, st.x, op)
	if voided then
		-- A request its Client has settled already (void_common): nobody
		-- waits for this reply.
		sema_store(st)
		return {0, 0, 3}
	end
end
if st.cap and st.cap ~= cap then
	return {-3, st.cap}
end
st.cap = cap
if n > cap then
	return {-4, cap}
end
local served = sema_serve(st, ARGV[8], ARGV[9], op)
local at = st.waiters > 0 and redis.call('zscore', k.q, op)
if not served and not at and st.waiters == 0 and n <= cap - st.used then
	sema_grant(st, op, n, lease, owner)
	served = true
end
if served then
	sema_wake_head(st, ARGV[8], op)
	sema_store(st)
	return {1, 0, n}
end
local place = 3
if at then
	place = 1
end
if ARGV[6] == '1' then
	local wt = ARGV[7]
	redis.call('zadd', k.c, st.now + tonumber(wt), op)
	if not at then
		redis.call('zadd', k.q, redis.call('hincrby', k.h, '~s', 1), op)
		redis.call('hset', k.h, 'w:' .. op, n .. ':' .. lease .. ':' .. wt .. ':' .. owner)
		st.waiters = st.waiters + 1
		place = 2
	end
end
sema_wake_head(st, ARGV[8], op)
sema_store(st)
return {0, sema_retry(st, op), place}
