-- include: rw_common void_common
-- rw_read_acquire: take or re-enter a read hold.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  tail: the last released write hold's token
-- KEYS[3]  readers' channel (woken with "all")
-- KEYS[4]  queue: the waiting writers' sorted set (see rw_common)
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation of the owner's read hold ("" : new)
-- ARGV[4]  lease in milliseconds
-- ARGV[5]  publish command: "publish" or "spublish"
-- ARGV[6]  "1" to hand over without trusting PUBLISH's receiver count
--          (classic pub/sub on a Cluster), "0" otherwise
--
-- Returns {1, 0, count}  acquired (read holds carry no fencing token)
--         {0, wait}      a writer holds the lock or waits for it: writers go
--                        first; wait is when that may change, in ms: the
--                        write hold's deadline, or the claim's (the
--                        earlier of the latest hold's and the queue's). The
--                        hash records that a reader waits (~r), so that the
--                        script that lets readers in tells them.
--         {-1, 0}        the caller's generation no longer holds (lost)
--
-- A lock that nobody holds any more (its holders expired) but with live
-- queued writers goes to the first of them that listens (see
-- hand_over_write). Idempotent under replay: a request whose op id is the
-- owner's last read op already ran.
local hash, owner, op, gen = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local lease = tonumber(ARGV[4])
local env = {tail = KEYS[2], rch = KEYS[3], q = KEYS[4], pub = ARGV[5], trust = ARGV[6]}
local now = now_ms()
local st = scan(hash, now, true)
local cf, df, gf, of = fields('r', owner)
-- A reader re-enters even when a writer waits: making it wait for a writer
-- that waits for it would deadlock.
local reply = seen(hash, 'r', owner, op, gen, lease, now, {st.f[cf], st.f[of], st.f[gf]}, 0)
if reply then
	return reply
end
if st.f['~x'] and void_claimed(hash, st.f['~x'], op) then
	-- A request its Client has settled already (void_common): nobody
	-- waits for this reply.
	return {0, 0}
end
-- The writer itself may read (downgrade); an owner's own leftover is taken
-- over.
if st.f[cf] or st.writer == owner then
	grant(hash, st, 'r', owner, op, lease, now)
	return {1, 0, 1}
end
if st.writer ~= nil then
	-- The write hold keeps the reader out, whatever the read holds beside
	-- it (its owner's, after a downgrade): the reader sleeps until its
	-- deadline, not the lock's latest (see wake_if_sooner).
	mark_readers(hash, st)
	return {0, st.dls['wd:' .. st.writer] - now}
end
if wq_live(hash, st, now) then
	if st.readers > 0 then
		mark_readers(hash, st)
		return {0, math.min(st.maxdl, wq_mark(st).dl) - now}
	end
	local granted = hand_over_write(hash, st, now, env, '')
	if granted then
		mark_readers(hash, st)
		return {0, granted}
	end
end
-- Nothing holds readers back any more: those that wait may go in too.
wake_readers(hash, st, env)
grant(hash, st, 'r', owner, op, lease, now)
return {1, 0, 1}
