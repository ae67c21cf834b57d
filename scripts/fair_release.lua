-- include: release_common
-- fair_release: release one hold of a fair lock; the final release hands the
-- lock over to the first queued waiter that still listens, in the same call
-- (see queue_common and fair_common).
--
-- KEYS[1]  lock hash (see fair_acquire); free, it keeps the last token
--          and the latch (see release_common)
-- KEYS[2]  queue (see fair_common)
-- KEYS[3]  the lock's channel, told when a hold someone listens to ends
-- ARGV[1]..ARGV[7]  as lock_release's
-- ARGV[8]  as lock_release's ARGV[9] (void_common)
--
-- Returns 1 free now or handed over, 0 one hold released, -1 lost (nothing
-- changed), as lock_release; idempotent under replay, as lock_release.
local done, cur = release_hold(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], KEYS[1])
if done then
	return done
end
local void = ARGV[8] == '1'
if cur and not void and free_alone(KEYS[1], ARGV[1], ARGV[2], cur, ARGV[6]) then
	-- No mark: nobody queued behind this hold (see fair_common).
	return 1
end
-- include here: release_rare handover_common fair_common void_common
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
free_hold(KEYS[1], KEYS[3], ARGV[2], KEYS[1], cur, ARGV[5], ARGV[6], ARGV[7], fz_reader(KEYS[1], KEYS[2], cur[4], ARGV[1]), ARGV[1])
return 1
