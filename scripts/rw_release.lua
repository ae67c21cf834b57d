-- include: rw_common release_rare void_common
-- rw_release: release one read or write hold of an owner; the release that
-- frees the lock hands the write hold over to the first queued writer that
-- still listens, in the same call (see rw_common).
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  readers' channel (woken with "all")
-- KEYS[3]  tail: keeps the last write token and the latch of the last final
--          releases for the latch's time (see release_common)
-- KEYS[4]  queue: the waiting writers' sorted set (see rw_common)
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation of the owner's hold of this kind
-- ARGV[4]  "r" to release a read hold, "w" a write hold
-- ARGV[5]  "1" for the caller's last hold of this kind, "0" otherwise
-- ARGV[6]  publish command: "publish" or "spublish"
-- ARGV[7]  latch lifetime in milliseconds
-- ARGV[8]  "1" to hand over without trusting PUBLISH's receiver count
--          (classic pub/sub on a Cluster), "0" otherwise
-- ARGV[9]  as lock_release's ARGV[9] (void_common)
--
-- Returns  1  the owner has no hold of this kind left
--          0  one hold released, the owner still holds the rest
--         -1  the generation does not hold (lost); nothing was changed
--
-- The end of the last hold hands the lock to the next writer, or, with no
-- writer waiting, tells the waiting readers (if any); the end of a write
-- hold that leaves read holds (a downgrade) tells them too, unless a writer
-- waits. Nothing is published when nobody waits. Idempotent under replay, as
-- lock_release.
local hash, owner, op, gen, kind = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local env = {rch = KEYS[2], tail = KEYS[3], q = KEYS[4], pub = ARGV[6], ms = ARGV[7], trust = ARGV[8], op = op}
local now = now_ms()
local st = scan(hash, now, true)
local cf, _, gf, of = fields(kind, owner)
local void = ARGV[9] == '1'
if st.f[gf] ~= gen then
	if void then
		void_mark(hash, st.f['~x'], gen, env.ms)
	end
	return release_replay(KEYS[1], KEYS[3], op)
end
if st.f[of] == op then
	return 0
end
if ARGV[5] ~= '1' then
	if tonumber(st.f[cf] or 0) > 1 then
		redis.call('hincrby', hash, cf, -1)
	end
	redis.call('hset', hash, of, op)
	return 0
end
-- The latch slot this release writes, when the hash carries the last
-- one (see rw_token): the hash that lives on carries the new one.
local s = st.f['~s']
if s then
	env.slot = next_slot(env.tail, s)
end
drop(st, kind, owner)
if not after_release(hash, st, now, env) then
	-- The lock stays held (other holds, or handed to a writer): the
	-- release is recorded in the latch all the same.
	if s and not env.carried then
		redis.call('hset', hash, '~s', env.slot)
	end
	end_hold(env.tail, op, nil, env.ms, s)
end
if void then
	-- The release of an acquire of unknown outcome, or the final release
	-- of a hold whose acquire was sent twice, named by the op id:
	-- the request, if it has yet to run, takes nothing (void_common). Made
	-- last: the release may have removed the hash, and the mark makes it
	-- again for the latch's time.
	void_mark(hash, st.f['~x'], gen, env.ms)
end
return 1
