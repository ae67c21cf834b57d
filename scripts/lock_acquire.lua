-- lock_acquire: take or re-enter a reentrant exclusive lock.
--
-- KEYS[1]  lock hash: owner -> hold count; ~g generation, ~o last op,
--          ~t fencing token; the lease as its PTTL
-- KEYS[2]  tail: the last released hold's token (see release_common)
-- ARGV[1]  owner ("<client uuid>:<owner id>")
-- ARGV[2]  op id of this request
-- ARGV[3]  generation the caller holds ("" : a new acquisition)
-- ARGV[4]  lease in milliseconds
-- ARGV[5]  "1" to hand out a fencing token on a new acquisition, "0" not to
--
-- Returns {1, token, count}  acquired (count: the owner's holds now)
--         {0, pttl}          held by another owner; pttl is its lease left
--         {-1, 0}            the caller's generation no longer holds: lost
--
-- Idempotent under replay: a request whose op id is the last applied already
-- ran. A new acquisition that finds the owner's own field under another
-- generation (a hold the Client has ended already, or one resumed with
-- WithOwner) takes it over as a new hold, with a new token.
local hash, owner, op, gen = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if gen ~= '' then
	return reenter_hold(hash, owner, op, gen, ARGV[4])
end
local cur = redis.call('hmget', hash, owner, '~o', '~t')
if cur[2] == op then
	return {1, tonumber(cur[3] or 0), tonumber(cur[1] or 0)}
end
if not cur[1] and redis.call('exists', hash) == 1 then
	return {0, redis.call('pttl', hash)}
end
return {1, grant_new(hash, KEYS[2], owner, op, ARGV[4], ARGV[5], cur[3]), 1}
