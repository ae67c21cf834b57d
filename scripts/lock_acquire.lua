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

if gen == '' then
	local cur = redis.call('hmget', hash, owner, '~o', '~t')
	if cur[2] == op then
		return {1, tonumber(cur[3] or 0), tonumber(cur[1] or 0)}
	end
	if not cur[1] and redis.call('exists', hash) == 1 then
		return {0, redis.call('pttl', hash)}
	end
	local token = 0
	if ARGV[5] == '1' then
		token = next_token(KEYS[2], cur[3])
	end
	-- A take-over overwrites every field the hash has (one owner's).
	redis.call('hset', hash, owner, 1, '~g', op, '~o', op, '~t', fmt(token))
	redis.call('pexpire', hash, ARGV[4])
	return {1, token, 1}
end

local cur = redis.call('hmget', hash, '~g', '~o', '~t')
if cur[1] ~= gen then
	return {-1, 0}
end
if cur[2] == op then
	return {1, tonumber(cur[3] or 0), tonumber(redis.call('hget', hash, owner) or 0)}
end
local count = redis.call('hincrby', hash, owner, 1)
redis.call('hset', hash, '~o', op)
-- A re-entry never shortens the lease the hold already has.
if redis.call('pttl', hash) < tonumber(ARGV[4]) then
	redis.call('pexpire', hash, ARGV[4])
end
return {1, tonumber(cur[3] or 0), count}
