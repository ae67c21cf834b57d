-- sema_common: the state of a Semaphore, prepended (after acquire_common and
-- release_common) to every sema_* script; not run on its own.
--
-- A Semaphore is one hash, "<prefix>:{name}:sema":
--   ~p         the capacity (permits) every user of the name agreed on
--   n:<gen>    permits of the hold <gen> (the op id of the acquire that
--              started it, or the waiter id a release handed them to)
--   d:<gen>    its deadline (server ms): it expires on its own lease
--   o:<gen>    its owner, for inspection
--   ~q         the waiters, in arrival order: per waiter five NUL-terminated
--              fields, its waiter id ("<client id>:<n>", the op id its
--              attempts send), the permits it asks for, its lease in ms,
--              its owner and its claim deadline (server ms; every attempt
--              pushes it to now + the waiter timeout, so a dead waiter's
--              claim lapses within that).
-- The hash's PTTL is the latest deadline of a hold or a claim, so it goes
-- with its last holder and waiter (and the capacity with it: the next user
-- records its own). Holds and claims whose deadline passed are evicted by
-- the next script that looks. Times come from the server (TIME).
--
-- Order is FIFO and strict (x/sync/semaphore's rule): permits go to the
-- head of the queue while they suffice; a head that needs more than is free
-- stops the walk, so small requests behind it never starve a large one.

local SEMA_ENTRY = '(([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z)'

-- sema_scan reads the hash (one HGETALL) and returns its live state: cap,
-- used (live permits), holds (gen -> {n, dl}), first (the earliest live
-- hold's deadline, nil for none: what the queued waiters sleep on), q (live
-- claims, in order), gone (fields of expired holds, for sema_store to
-- delete) and set (fields to write).
local function sema_scan(hash, now)
	local all = redis.call('hgetall', hash)
	local f = {}
	for i = 1, #all, 2 do
		f[all[i]] = all[i + 1]
	end
	local st = {cap = tonumber(f['~p']), used = 0, holds = {}, q = {}, gone = {}, set = {}}
	for k, v in pairs(f) do
		local g = string.match(k, '^d:(.*)$')
		if g then
			local dl, n = tonumber(v), tonumber(f['n:' .. g] or 0)
			if dl > now then
				st.holds[g] = {n = n, dl = dl}
				st.used = st.used + n
				if not st.first or dl < st.first then
					st.first = dl
				end
			else
				table.insert(st.gone, 'n:' .. g)
				table.insert(st.gone, 'd:' .. g)
				table.insert(st.gone, 'o:' .. g)
			end
		end
	end
	for _, w, n, lease, owner, dl in string.gmatch(f['~q'] or '', SEMA_ENTRY) do
		if tonumber(dl) > now then
			st.q[#st.q + 1] = {w = w, n = tonumber(n), lease = tonumber(lease), owner = owner, dl = tonumber(dl)}
		end
	end
	return st
end

-- sema_grant records a hold of n permits, generation gen, in st.
local function sema_grant(st, gen, n, lease, owner, now)
	st.holds[gen] = {n = n, dl = now + lease}
	st.used = st.used + n
	local s = st.set
	s[#s + 1], s[#s + 2] = 'n:' .. gen, n
	s[#s + 1], s[#s + 2] = 'd:' .. gen, now + lease
	s[#s + 1], s[#s + 2] = 'o:' .. gen, owner
end

-- sema_drop ends hold gen in st.
local function sema_drop(st, gen)
	local h = st.holds[gen]
	if h then
		st.used = st.used - h.n
		st.holds[gen] = nil
		table.insert(st.gone, 'n:' .. gen)
		table.insert(st.gone, 'd:' .. gen)
		table.insert(st.gone, 'o:' .. gen)
	end
end

-- sema_client is the Client id of waiter id w ("<client id>:<n>"), or nil.
local function sema_client(w)
	return string.match(w, '^(.*):')
end

-- sema_wake tells every Client with a waiter among entries to have its
-- waiters on the semaphore try again: 'all' on its channel, once per
-- Client, which also reaches a waiter between two attempts (it sees the
-- broadcast when it goes back to sleep).
local function sema_wake(hash, entries, pub)
	local told = {}
	for _, e in ipairs(entries) do
		local client = sema_client(e.w)
		if client and not told[client] then
			told[client] = true
			redis.call(pub, hash .. ':w:' .. client, 'all')
		end
	end
end

-- sema_refuse takes out of the queue every waiter asking for more than the
-- capacity (a smaller one set while it waited) and wakes each: its next
-- attempt is refused (see sema_acquire), so it fails at once instead of
-- waiting for permits that can never be free.
local function sema_refuse(hash, st, pub)
	local kept, refused = {}, {}
	for _, e in ipairs(st.q) do
		if e.n > st.cap then
			refused[#refused + 1] = e
		else
			kept[#kept + 1] = e
		end
	end
	if #refused > 0 then
		st.q = kept
		sema_wake(hash, refused, pub)
	end
end

-- sema_serve hands free permits to the head of the queue, in order, while
-- they suffice. Each waiter served is told alone, on its Client's channel
-- for the semaphore (<hash>:w:<client id>, "<waiter id> 0": semaphores
-- hand out no fencing token), and holds when the message arrives; PUBLISH
-- counts the receivers, so a waiter whose Client no longer listens (dead,
-- closed, gone) is skipped, never granted (unless trust is '1': classic
-- pub/sub on a Cluster counts one node only). The entry of self (the
-- caller of an acquire) is granted without a message. A waiter asking for
-- more than the capacity can never be served and is refused (sema_refuse).
-- When a grant ends before every hold the queue knew of (st.first: each
-- waiter sleeps until the earliest hold's end at most), the waiters left
-- are woken to re-check: nothing is published when that shorter lease runs
-- out, and they would sleep past it. It returns whether self was served
-- (its hold is granted too, with the lease and owner it queued with).
local function sema_serve(hash, st, now, pub, trust, self)
	sema_refuse(hash, st, pub)
	local served, soonest = false, nil
	while #st.q > 0 do
		local e = st.q[1]
		if e.n > st.cap - st.used then
			break
		end
		table.remove(st.q, 1)
		local client = sema_client(e.w)
		if e.w == self or (client and (redis.call(pub, hash .. ':w:' .. client, e.w .. ' 0') > 0 or trust == '1')) then
			-- Granted here, so that the walk goes on with its permits
			-- counted.
			sema_grant(st, e.w, e.n, e.lease, e.owner, now)
			served = served or e.w == self
			if not soonest or now + e.lease < soonest then
				soonest = now + e.lease
			end
		end
	end
	if soonest and #st.q > 0 and (not st.first or soonest < st.first) then
		sema_wake(hash, st.q, pub)
	end
	return served
end

-- sema_queued returns the index of waiter w in st's queue, or nil.
local function sema_queued(st, w)
	for i, e in ipairs(st.q) do
		if e.w == w then
			return i
		end
	end
	return nil
end

-- sema_store writes st back: the capacity, the queue, the holds changed,
-- the expired ones deleted, and the PTTL (the latest live deadline). A
-- semaphore nobody holds or waits for is deleted.
local function sema_store(hash, st, now)
	local maxdl = 0
	for _, h in pairs(st.holds) do
		maxdl = math.max(maxdl, h.dl)
	end
	local q = {}
	for _, e in ipairs(st.q) do
		q[#q + 1] = table.concat({e.w, e.n, e.lease, e.owner, e.dl}, '\0') .. '\0'
		maxdl = math.max(maxdl, e.dl)
	end
	if maxdl == 0 then
		redis.call('del', hash)
		return
	end
	if #st.gone > 0 then
		redis.call('hdel', hash, unpack(st.gone))
	end
	local s = st.set
	s[#s + 1], s[#s + 2] = '~p', st.cap
	if #q > 0 then
		s[#s + 1], s[#s + 2] = '~q', table.concat(q)
	else
		redis.call('hdel', hash, '~q')
	end
	redis.call('hset', hash, unpack(s))
	redis.call('pexpire', hash, maxdl - now)
end

-- sema_retry is a busy attempt's retryIn: the time to the earliest hold's
-- deadline (when permits may come back by expiry), -1 when none holds.
local function sema_retry(st, now)
	local first
	for _, h in pairs(st.holds) do
		if not first or h.dl < first then
			first = h.dl
		end
	end
	if not first then
		return -1
	end
	return first - now
end
