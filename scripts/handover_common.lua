-- handover_common: the hand-over of an exclusive lock (Lock, and a Lock that
-- is a MultiLock part) to its first queued waiter, prepended after
-- acquire_common, release_common and queue_common to the scripts that free
-- a hold (release, abandon, force release). The acquire scripts do without
-- it: an acquire never frees a hold, and every helper a script carries is
-- created again at each of its calls.

-- hand_over gives the lock in hash, being freed, to the first queued waiter
-- whose Client still listens, in the same call: it publishes the grant
-- ("<waiter id> <token>") on that Client's channel for this lock,
-- <hash>:w:<client uuid>, and writes the hold — count 1, generation = the
-- waiter id, token = last + 1 (or a new one when the last hold had none),
-- the waiter's lease — keeping the rest of the queue and ~m. When that lease
-- is shorter than the one of the hold it follows (l), the next waiter is
-- woken ("<waiter id>") to try once: it slept on the longer lease, and would
-- oversleep the new hold's end if its holder never releases. PUBLISH counts
-- its receivers: a Client that crashed, closed or stopped waiting on this
-- lock is not subscribed, so its waiters are skipped, never granted (unless
-- trust is '1': classic pub/sub on a Cluster, whose count covers one node
-- only). It returns true when the lock was handed over.
local function hand_over(hash, tail, q, last, m, l, pub, trust)
	while q and q ~= '' do
		local e, w, lease, fencing, owner = string.match(q, '^' .. Q_ENTRY)
		if not e then
			return false
		end
		q = string.sub(q, #e + 1)
		local token = 0
		if fencing == '1' then
			if tonumber(last or 0) > 0 then
				token = tonumber(last) + 1
			else
				token = next_token(tail, 0)
			end
		end
		local client = string.match(w, '^(.*):')
		if client then
			local heard = redis.call(pub, hash .. ':w:' .. client, w .. ' ' .. fmt(token))
			if heard > 0 or trust == '1' then
				redis.call('del', hash)
				local f = {owner, 1, '~g', w, '~o', w, '~t', fmt(token), '~l', lease}
				if q ~= '' then
					f[#f + 1], f[#f + 2] = '~q', q
				end
				if m then
					f[#f + 1], f[#f + 2] = '~m', m
				end
				redis.call('hset', hash, unpack(f))
				redis.call('pexpire', hash, lease)
				local nxt = string.match(q, '^([^%z]*)%z')
				if nxt and tonumber(lease) < tonumber(l or 0) then
					redis.call(pub, hash .. ':w:' .. (string.match(nxt, '^(.*):') or ''), nxt)
				end
				return true
			end
		end
	end
	return false
end

-- free_hold ends an exclusive hold whose fields are cur ({~g, ~o, ~t, ~q,
-- ~m, ~l}, as release_hold returns them): it hands the lock over to a queued
-- waiter, or deletes it, telling a waiting MultiLock on channel and leaving
-- the tail; either way latch (when given) marks the request as done.
local function free_hold(hash, channel, latch, tail, cur, pub, ms, trust)
	if hand_over(hash, tail, cur[4], cur[3], cur[5], cur[6], pub, trust) then
		if latch then
			redis.call('set', latch, '1', 'px', ms)
		end
		return
	end
	redis.call('del', hash)
	if cur[5] then
		-- Every listener re-checks ('all'): the one that gets the lock
		-- writes a new hash, which the others' attempts mark again.
		redis.call(pub, channel, 'all')
	end
	if latch then
		end_hold(latch, tail, cur[3], ms)
	elseif cur[3] and tonumber(cur[3]) > 0 then
		redis.call('set', tail, cur[3], 'px', ms)
	end
end
