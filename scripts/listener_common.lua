-- include: acquire_common queue_common
-- listener_common: the walk of a queue of waiters (queue_common's entries)
-- for the first whose Client listens, shared by every hand-over: Lock's and
-- FairLock's (handover_common) and an RWLock's writers' (rw_common). It is
-- prepended after queue_common, before either; on its own in a file so that
-- an RWLock script does not carry Lock's hand-over, nor Lock's acquire this.
-- Each kind keeps its queue its own way and gives the walk an iterator,
-- next(), over its entries from the head: a Lock's fields (qf_reader), a
-- FairLock's sorted set (fz_reader), an RWLock's (wq_reader, rw_common).

-- first_listener walks the entries next() gives (pattern pat: waiter id,
-- lease, fencing flag, owner, then whatever else the format has) for the
-- first waiter whose Client still listens, and publishes the grant
-- ("<waiter id> <token>") on that Client's channel for the lock in hash,
-- <hash>:w:<client id>; the token is fence() for a waiter with fencing
-- ('1'), else 0, computed before the grant that carries it. PUBLISH counts
-- its receivers: a Client that crashed, closed or stopped waiting on this
-- lock is not subscribed, so its waiters are skipped, never granted (unless
-- trust is '1': classic pub/sub on a Cluster, whose count covers one node
-- only). The entry of waiter self (the caller of an acquire) is never
-- published to: reaching it stops the walk, its token not computed.
--
-- It returns 'heard' or 'self' (which entry stopped the walk), and the
-- entry's waiter id, lease, fencing flag, owner and (for 'heard') token, as
-- a number and as text (fence may give the text, see next_token); nil when
-- nobody listened. Every entry next() gave is out of the queue (the
-- iterator's own bookkeeping); it writes nothing but the PUBLISHes: the
-- caller grants the hold.
local function first_listener(hash, next, pat, fence, pub, trust, self)
	for e in next do
		local _, w, lease, fencing, owner = string.match(e, '^' .. pat)
		if w and w == self then
			return 'self', w, lease, fencing, owner
		end
		local token, text = 0, '0'
		if fencing == '1' then
			token, text = fence()
			text = text or fmt(token)
		end
		local client = string.match(w or '', '^(.*):')
		if client and (redis.call(pub, hash .. ':w:' .. client, w .. ' ' .. text) > 0 or trust == '1') then
			return 'heard', w, lease, fencing, owner, token, text
		end
	end
	return nil
end

-- wake_queue tells every Client that has a waiter among the entries next()
-- gives (pattern pat) to have its waiters on the lock in hash try again:
-- 'all' on its channel, once per Client. A hand-over to a shorter lease
-- than the freed hold's calls it, so that no waiter sleeps past the new
-- hold's end. It is the one step of a hand-over that reads the whole queue,
-- and only then.
local function wake_queue(hash, next, pat, pub)
	local told = {}
	for e in next do
		local _, w = string.match(e, '^' .. pat)
		local client = string.match(w or '', '^(.*):')
		if client and not told[client] then
			told[client] = true
			redis.call(pub, hash .. ':w:' .. client, 'all')
		end
	end
end
