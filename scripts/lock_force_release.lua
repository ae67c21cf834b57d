-- include: handover_common force_common
-- lock_force_release: free a lock whoever holds it; the first queued waiter
-- that still listens gets it, as on a release.
--
-- KEYS[1]  lock hash
-- KEYS[2]  the lock's channel (see lock_release)
-- KEYS[3]  the force releases' answers, for a replay (see force_common);
--          the freed hold's token stays in the hash (see release_common)
-- ARGV[1]  publish command: "publish" or "spublish"
-- ARGV[2]  the unlock latch in milliseconds
-- ARGV[3]  as lock_release's ARGV[7]
-- ARGV[4]  op id of this request (see force_common)
-- ARGV[5]  the Clients' own channels' prefix ('' : tell nobody, see
--          force_tell)
-- ARGV[6]  the owner the hold must have ('' : any), ARGV[7] its fencing
--          token ('' : any): a guarded force release (see force_expects)
--
-- Returns the generation of the hold it removed ({} when the lock was not
-- held): the caller ends exactly that hold, not the one it was handed to;
-- or, when the hold is not the one ARGV[6] and ARGV[7] expect,
-- force_refused's reply, and nothing changes.
local replayed = force_replayed(KEYS[3], ARGV[4])
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
free_hold(KEYS[1], KEYS[2], nil, KEYS[1], cur, ARGV[1], ARGV[2], ARGV[3], qf_reader(KEYS[1], cur[4]))
force_record(KEYS[3], ARGV[4], {cur[1]}, ARGV[2])
force_tell(ARGV[5], {cur[1]}, KEYS[1], ARGV[4])
return {cur[1]}
