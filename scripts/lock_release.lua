-- include: release_common
-- lock_release: release one hold of a reentrant exclusive lock; the final
-- release hands the lock over to the first queued waiter that still listens,
-- in the same call (see handover_common).
--
-- KEYS[1]  lock hash (see lock_acquire)
-- KEYS[2]  the lock's channel, told when it becomes free if a MultiLock waits
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation the caller holds
-- ARGV[4]  "1" when the caller releases its last hold: the lock is freed
--          whatever the count says, "0" for a re-entry's release
-- ARGV[5]  publish command: "publish" or "spublish" (sharded pub/sub)
-- ARGV[6]  latch lifetime in milliseconds: how long the free lock's
--          record (its token and the latch, see release_common) lives
-- ARGV[7]  "1" to hand over without trusting PUBLISH's receiver count
--          (classic pub/sub on a Cluster), "0" otherwise
-- ARGV[8]  the queue position the Client expects at the head when this
--          hold ends: the one after the waiter's own, for a hold handed
--          over from the queue ("" or absent: none). A guess, checked
--          against ~q: its entry is read with the hold's fields, and a
--          hand-over to it reads no more of the queue (see qf_reader).
-- ARGV[9]  "1": the release of an acquire whose outcome the Client does
--          not know, or the final release of a hold whose acquire was sent
--          twice; ARGV[3] is that acquire's op id, which is marked void
--          whether or not it holds (void_common); absent or "0" otherwise
--
-- Returns  1  the caller's hold is over: the lock is free or handed over
--          0  one hold released, the owner still holds the rest
--         -1  the caller's generation does not hold the lock: it was lost,
--             and nothing was changed
--
-- Idempotent under replay: a request whose op id is the last applied, or
-- that the latch records, already ran.
local at = ARGV[8]
local ahead
if at and at ~= '' then
	ahead = '~#' .. at
end
local done, cur = release_hold(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], KEYS[1], ahead)
if done then
	return done
end
local void = ARGV[9] == '1'
if cur and not void and free_alone(KEYS[1], ARGV[1], ARGV[2], cur, ARGV[6]) then
	return 1
end
-- A replay, or someone waits: the rarer helpers are made only here.
-- include here: release_rare handover_common void_common
if void then
	-- The release of an acquire of unknown outcome, or the final release
	-- of a hold whose acquire was sent twice, named by the op id
	-- (ARGV[3]): the request, if it has yet to run, takes nothing
	-- (void_common).
	void_mark(KEYS[1], redis.call('hget', KEYS[1], '~x'), ARGV[3], ARGV[6])
	if cur and free_alone(KEYS[1], ARGV[1], ARGV[2], cur, ARGV[6]) then
		return 1
	end
end
if not cur then
	return release_replay(KEYS[1], KEYS[1], ARGV[2])
end
free_hold(KEYS[1], KEYS[2], ARGV[2], KEYS[1], cur, ARGV[5], ARGV[6], ARGV[7], qf_reader(KEYS[1], cur[4], ARGV[1], at, cur[9]), ARGV[1])
return 1
