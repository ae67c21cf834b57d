-- sema_common: the state of a Semaphore, prepended (after acquire_common and
-- release_common) to every sema_* script; not run on its own.
--
-- A Semaphore is four keys under its name's hash tag (one Cluster slot), so
-- that every step costs O(log n) in its holders and waiters:
--   "<prefix>:{name}:sema" (k.h), a hash:
--     ~p         the capacity (permits) every user of the name agreed on
--     ~u         the permits of the holds recorded (a running count)
--     ~w         the waiters queued (a running count: 0 or none spares
--                every look at the queue)
--     ~s         the last arrival number given to a waiter
--     h:<gen>    the hold <gen> (the op id of the acquire that started it,
--                or the waiter id a release handed it to): "<permits>:<owner>"
--     w:<id>     the waiter <id> ("<client id>:<n>", the op id its attempts
--                send): "<permits>:<lease ms>:<waiter timeout ms>:<owner>"
--   ":sema:d" (k.d), a sorted set: each hold's generation by its deadline
--                (server ms): it expires on its own lease
--   ":sema:q" (k.q), a sorted set: each waiter's id by its arrival number:
--                the queue, in order
--   ":sema:c" (k.c), a sorted set: each waiter's id by its claim deadline
--                (server ms; every attempt pushes it to now + the waiter
--                timeout, so a dead waiter's claim lapses within that)
-- Every key's PTTL is the latest deadline of a hold or a claim, so they go
-- with the last holder and waiter (and the capacity with them: the next
-- user records its own). Holds and claims whose deadline passed are
-- reclaimed from the head of their sorted set by the next script that
-- looks. Times come from the server (TIME).
--
-- Order is FIFO and strict (x/sync/semaphore's rule): permits go to the
-- head of the queue while they suffice; a head that needs more than is free
-- stops the walk, so small requests behind it never starve a large one.

-- SEMA_BATCH bounds the values one command of a reclaim carries (Lua's
-- unpack has a limit).
local SEMA_BATCH = 1000

-- SEMA_VOID_MS is how long the void marks (void_common) of a semaphore
-- nobody holds or waits for are kept: a request that reaches Redis later
-- than that after its settlement is not fenced.
local SEMA_VOID_MS = 60000

-- sema_hold reads a hold's value: its permits and owner.
local function sema_hold(v)
	local n, owner = string.match(v, '^(%d+):(.*)$')
	return tonumber(n), owner
end

-- sema_waiter reads a waiter's value: permits, lease, waiter timeout, owner.
local function sema_waiter(v)
	local n, lease, wt, owner = string.match(v, '^(%d+):(%d+):(%d+):(.*)$')
	return tonumber(n), tonumber(lease), tonumber(wt), owner
end

-- sema_each calls f with the values of ids, SEMA_BATCH at a time, each id
-- prefixed by pre to name its field of the hash.
local function sema_each(k, ids, pre, f)
	for i = 1, #ids, SEMA_BATCH do
		local fields = {}
		for j = i, math.min(i + SEMA_BATCH - 1, #ids) do
			fields[#fields + 1] = pre .. ids[j]
		end
		f(fields, redis.call('hmget', k.h, unpack(fields)))
	end
end

-- sema_head is the id at the head of the queue, or nil.
local function sema_head(k)
	return redis.call('zrange', k.q, 0, 0)[1]
end

-- sema_keep_marks writes back, for SEMA_VOID_MS, the void marks
-- (void_common) of a semaphore whose hash was just removed: nobody holds
-- or waits for it, and its marks outlive its state.
local function sema_keep_marks(st)
	if st.x then
		redis.call('hset', st.k.h, '~x', st.x)
		redis.call('pexpire', st.k.h, SEMA_VOID_MS)
	end
end

-- sema_reclaim takes out the holds whose lease ended (their permits come
-- back) and the waiters whose claim lapsed, from the head of their sorted
-- sets. It writes the running count; when nothing is left, the semaphore
-- is deleted and st.cap is nil.
local function sema_reclaim(st)
	local k, now = st.k, st.now
	local ended = redis.call('zrangebyscore', k.d, '-inf', now)
	local lapsed = {}
	if st.waiters > 0 then
		lapsed = redis.call('zrangebyscore', k.c, '-inf', now)
	end
	if #ended == 0 and #lapsed == 0 then
		return
	end
	st.waiters = st.waiters - #lapsed
	sema_each(k, ended, 'h:', function(fields, vals)
		for _, v in ipairs(vals) do
			if v then
				st.used = st.used - sema_hold(v)
			end
		end
		redis.call('hdel', k.h, unpack(fields))
	end)
	sema_each(k, lapsed, 'w:', function(fields)
		redis.call('hdel', k.h, unpack(fields))
	end)
	for i = 1, #lapsed, SEMA_BATCH do
		redis.call('zrem', k.q, unpack(lapsed, i, math.min(i + SEMA_BATCH - 1, #lapsed)))
	end
	redis.call('zremrangebyscore', k.d, '-inf', now)
	redis.call('zremrangebyscore', k.c, '-inf', now)
	-- One key per command here and below: on a Cluster master that is
	-- importing the slot, a command naming several keys fails when one of
	-- them is missing, and the script would stop half-way, its reclaim done
	-- but the running count not written.
	if redis.call('exists', k.d) == 0 and redis.call('exists', k.c) == 0 then
		redis.call('del', k.h)
		redis.call('del', k.q)
		st.cap, st.used, st.waiters = nil, 0, 0
		sema_keep_marks(st)
		return
	end
	redis.call('hset', k.h, '~u', st.used, '~w', st.waiters)
end

-- sema_open reads the semaphore at server time now (ms), reclaiming what
-- ended: st.cap (nil when nobody holds or waits), st.used (permits of live
-- holds), st.waiters (the queue's length), st.head (the queue's head before
-- anything changed, see sema_wake_head) and st.set (fields sema_store
-- writes).
local function sema_open(k, now)
	local f = redis.call('hmget', k.h, '~p', '~u', '~w', '~v', '~x')
	layout_check(f[4], k.h)
	local st = {k = k, now = now, cap = tonumber(f[1]), used = tonumber(f[2] or 0), waiters = tonumber(f[3] or 0), set = {}, x = f[5]}
	if st.cap then
		if st.waiters > 0 then
			st.head = sema_head(k)
		end
		sema_reclaim(st)
	end
	return st
end

-- sema_grant records a hold of n permits, generation gen (its field is
-- written by sema_store).
local function sema_grant(st, gen, n, lease, owner)
	local s = st.set
	s[#s + 1], s[#s + 2] = 'h:' .. gen, n .. ':' .. owner
	redis.call('zadd', st.k.d, st.now + lease, gen)
	st.used = st.used + n
end

-- sema_drop ends hold gen; false when it is not held.
local function sema_drop(st, gen)
	local v = redis.call('hget', st.k.h, 'h:' .. gen)
	if not v then
		return false
	end
	st.used = st.used - sema_hold(v)
	redis.call('hdel', st.k.h, 'h:' .. gen)
	redis.call('zrem', st.k.d, gen)
	return true
end

-- sema_unqueue takes waiter id out of the queue.
local function sema_unqueue(st, id)
	local k = st.k
	redis.call('zrem', k.q, id)
	redis.call('zrem', k.c, id)
	redis.call('hdel', k.h, 'w:' .. id)
	st.waiters = st.waiters - 1
end

-- sema_client is the Client id of waiter id w ("<client id>:<n>"), or nil.
local function sema_client(w)
	return string.match(w, '^(.*):')
end

-- sema_wake tells the Client of waiter w to have its waiters on the
-- semaphore try again: 'all' on its channel, which also reaches a waiter
-- between two attempts (it sees the broadcast when it goes back to sleep).
local function sema_wake(st, w, pub)
	local client = sema_client(w)
	if client then
		redis.call(pub, st.k.h .. ':w:' .. client, 'all')
	end
end

-- sema_refuse takes out of the queue every waiter asking for more than the
-- capacity (a smaller one set while it waited) and wakes it: its next
-- attempt is refused (see sema_acquire), so it fails at once instead of
-- waiting for permits that can never be free. It reads the whole queue,
-- and runs only when the capacity shrinks.
local function sema_refuse(st, pub)
	local told = {}
	sema_each(st.k, redis.call('zrange', st.k.q, 0, -1), 'w:', function(fields, vals)
		for i, v in ipairs(vals) do
			local id = string.sub(fields[i], 3)
			if not v or sema_waiter(v) > st.cap then
				sema_unqueue(st, id)
				local client = sema_client(id)
				if client and not told[client] then
					told[client] = true
					sema_wake(st, id, pub)
				end
			end
		end
	end)
end

-- sema_serve hands free permits to the head of the queue, in order, while
-- they suffice. Each waiter served is told alone, on its Client's channel
-- for the semaphore (<hash>:w:<client id>, "<waiter id> 0": semaphores
-- hand out no fencing token), and holds when the message arrives; PUBLISH
-- counts the receivers, so a waiter whose Client no longer listens (dead,
-- closed, gone) is skipped, never granted (unless trust is '1': classic
-- pub/sub on a Cluster counts one node only). The entry of self (the
-- caller of an acquire) is granted without a message. It returns whether
-- self was served (its hold is granted too, with the lease and owner it
-- queued with).
local function sema_serve(st, pub, trust, self)
	local k, served = st.k, false
	while st.waiters > 0 do
		local w = sema_head(k)
		if not w then
			break
		end
		local v = redis.call('hget', k.h, 'w:' .. w)
		local n, lease, _, owner
		if v then
			n, lease, _, owner = sema_waiter(v)
			if n > st.cap - st.used then
				break
			end
		end
		sema_unqueue(st, w)
		local client = sema_client(w)
		if v and (w == self or (client and (redis.call(pub, k.h .. ':w:' .. client, w .. ' 0') > 0 or trust == '1'))) then
			-- Granted here, so that the walk goes on with its permits
			-- counted.
			sema_grant(st, w, n, lease, owner)
			served = served or w == self
		end
	end
	return served
end

-- sema_first is the earliest deadline of a live hold (server ms), or nil.
local function sema_first(k)
	return tonumber(redis.call('zrange', k.d, 0, 0, 'withscores')[2])
end

-- sema_wake_head keeps the promise that the head of the queue tries again
-- by the earliest hold's deadline, when permits may come back by expiry
-- with nobody to publish it: only the head sleeps on that deadline (see
-- sema_retry); the others sleep until their claim's refresh, since nothing
-- can serve them before the head. A head that is new since st.head (the
-- one before it was served, left or lapsed) slept on its refresh, at most
-- a third of its waiter timeout after its last attempt: when a hold ends
-- before that (a hand-over to a short lease), its Client is woken, so that
-- its next attempt comes by that hold's end. One Client is told, never
-- the queue. self (an acquire's caller) learns it from its reply.
local function sema_wake_head(st, pub, self)
	local k = st.k
	if st.waiters == 0 then
		return
	end
	local w = sema_head(k)
	if not w or w == st.head or w == self then
		return
	end
	local first = sema_first(k)
	local v = redis.call('hget', k.h, 'w:' .. w)
	local claim = tonumber(redis.call('zscore', k.c, w))
	if not first or not v or not claim then
		return
	end
	local _, _, wt = sema_waiter(v)
	if first < claim - wt + math.floor(wt / 3) then
		sema_wake(st, w, pub)
	end
end

-- sema_store writes the fields st.set collected, the capacity and the
-- running counts, and sets every key's PTTL to the latest live deadline.
-- A semaphore nobody holds or waits for is deleted.
local function sema_store(st)
	local k = st.k
	local maxdl = tonumber(redis.call('zrange', k.d, -1, -1, 'withscores')[2] or 0)
	if st.waiters > 0 then
		maxdl = math.max(maxdl, tonumber(redis.call('zrange', k.c, -1, -1, 'withscores')[2] or 0))
	end
	if maxdl == 0 then
		redis.call('del', k.h) -- one key per command (see sema_reclaim)
		redis.call('del', k.q)
		redis.call('del', k.c)
		sema_keep_marks(st)
		return
	end
	local s = st.set
	s[#s + 1], s[#s + 2] = '~p', st.cap
	s[#s + 1], s[#s + 2] = '~u', st.used
	s[#s + 1], s[#s + 2] = '~w', st.waiters
	redis.call('hset', k.h, unpack(s))
	local ttl = maxdl - st.now
	redis.call('pexpire', k.h, ttl)
	redis.call('pexpire', k.d, ttl)
	if st.waiters > 0 then
		redis.call('pexpire', k.q, ttl)
		redis.call('pexpire', k.c, ttl)
	end
end

-- sema_retry is a busy attempt's retryIn: for the head of the queue, or a
-- caller not queued, the time to the earliest hold's deadline (when
-- permits may come back by expiry), -1 when none holds; -1 for a waiter
-- behind the head, who sleeps until its claim's refresh (see
-- sema_wake_head).
local function sema_retry(st, self)
	if st.waiters > 0 and sema_head(st.k) ~= self and redis.call('zscore', st.k.q, self) then
		return -1
	end
	local first = sema_first(st.k)
	if not first then
		return -1
	end
	return first - st.now
end
