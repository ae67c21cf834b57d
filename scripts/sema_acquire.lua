-- include: acquire_common sema_common
-- sema_acquire: take n permits of a Semaphore, or queue for them.
--
-- KEYS[1]  semaphore hash (see sema_common)
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
--                        none; place where the attempt left the waiter: 1
--                        queued before and still, 2 queued by this attempt,
--                        3 not queued (queue_common's Q_KEPT, Q_ANEW,
--                        Q_ABSENT, which the wait loop reads)
--         {-3, cap}      Redis records another capacity: nothing changed
--         {-4, cap}      n is more than the capacity cap: nothing changed
--
-- Idempotent under replay: a request whose op already holds (a replay, or
-- the claim of a grant that reached the waiter late) is acquired again,
-- its lease counted from now, before any check: a replay gets the first
-- run's reply even when the capacity changed in between. A newcomer never
-- passes a waiter: it takes permits only when nobody is left in the queue
-- after the waiters the free permits serve (they are handed theirs in the
-- same call).
local hash, owner, op = KEYS[1], ARGV[1], ARGV[2]
local n, cap, lease = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = math.floor(now_us() / 1000)
local st = sema_scan(hash, now)
local h = st.holds[op]
if h then
	if now + lease > h.dl then
		h.dl = now + lease
		st.set[1], st.set[2] = 'd:' .. op, h.dl
	end
	sema_store(hash, st, now)
	return {1, 0, h.n}
end
if st.cap and st.cap ~= cap then
	return {-3, st.cap}
end
st.cap = cap
if n > cap then
	return {-4, cap}
end
local served = sema_serve(hash, st, now, ARGV[8], ARGV[9], op)
local at = sema_queued(st, op)
if not served and not at and #st.q == 0 and n <= cap - st.used then
	sema_grant(st, op, n, lease, owner, now)
	served = true
end
if served then
	sema_store(hash, st, now)
	return {1, 0, n}
end
local place = 3
if at then
	place = 1
end
if ARGV[6] == '1' then
	local dl = now + tonumber(ARGV[7])
	if at then
		st.q[at].dl = dl
	else
		st.q[#st.q + 1] = {w = op, n = n, lease = lease, owner = owner, dl = dl}
		place = 2
	end
end
sema_store(hash, st, now)
return {0, sema_retry(st, now), place}
