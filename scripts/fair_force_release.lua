-- include: handover_common fair_common force_common
-- fair_force_release: free a fair lock whoever holds it; the first queued
-- waiter that still listens gets it, as on a release. The queue keeps its
-- order.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue (see fair_common)
-- KEYS[3]  the lock's channel (see fair_release)
-- KEYS[4]  the force releases' answers, for a replay (see force_common);
--          the freed hold's token stays in the hash (see release_common)
-- ARGV[1]  publish command: "publish" or "spublish"
-- ARGV[2]  the unlock latch in milliseconds
-- ARGV[3]  as lock_release's ARGV[7]
-- ARGV[4]  op id of this request (see force_common)
-- ARGV[5..7] as lock_force_release's: the channels' prefix, the owner and
--          the token a guarded force release expects
--
-- Returns the generation of the hold it removed ({} when the lock was not
-- held): the caller ends exactly that hold, not the one it was handed to;
-- or force_refused's reply, as lock_force_release.
local replayed = force_replayed(KEYS[4], ARGV[4])
if replayed then
	return replayed
end
local cur = redis.call('hmget', KEYS[1], '~g', '~o', '~t', '~q', '~m', '~l', '~v')
layout_check(cur[7], KEYS[1])
cur[7] = nil
if not cur[1] then
	return {}
end
if not force_expects(KEYS[1], cur[3], ARGV[6], ARGV[7]) then
	return force_refused(cur[3], force_owners(KEYS[1]))
end
free_hold(KEYS[1], KEYS[3], nil, KEYS[1], cur, ARGV[1], ARGV[2], ARGV[3], fz_reader(KEYS[1], KEYS[2], cur[4]))
force_record(KEYS[4], ARGV[4], {cur[1]}, ARGV[2])
force_tell(ARGV[5], {cur[1]}, KEYS[1], ARGV[4])
return {cur[1]}
