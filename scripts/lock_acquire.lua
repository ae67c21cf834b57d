-- lock_acquire: take or re-enter a reentrant exclusive lock.
--
-- KEYS[1]  lock hash: owner -> hold count, with the lease as its PTTL
-- KEYS[2]  fencing counter of this lock name (never expires)
-- ARGV[1]  owner ("<client uuid>:<owner id>")
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  hold count the caller believes this owner has (0: new acquisition)
-- ARGV[4]  "1" to hand out a fencing token on a new acquisition, "0" not to
--
-- Returns {1, token}  acquired; token is the hold's fencing token (the
--                     counter's value, also on re-entry; 0 with fencing off)
--         {0, pttl}   held by another owner; pttl is its remaining lease
--         {-1, n}     this owner's count is n, not what the caller believed:
--                     the hold was lost (expired, deleted, force-unlocked)
--
-- Idempotent under replay: go-redis may resend the script when a reply is
-- lost. A count one above the caller's belief can only come from this very
-- request (the caller serialises its own operations), so it is success, not a
-- second hold (settled, from acquire_common.lua).
local believed = tonumber(ARGV[3])

-- The common case first: a new acquisition of a free lock needs no count.
if believed == 0 and redis.call('exists', KEYS[1]) == 0 then
	redis.call('hset', KEYS[1], ARGV[1], 1)
	redis.call('pexpire', KEYS[1], ARGV[2])
	if ARGV[4] == '1' then
		return {1, redis.call('incr', KEYS[2])}
	end
	return {1, 0}
end

local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
local done = settled(count, believed, KEYS[2], ARGV[4])
if done then
	return done
end
if believed == 0 then
	return {0, redis.call('pttl', KEYS[1])}
end

-- Re-entry never shortens the lease the outer hold already has.
redis.call('hincrby', KEYS[1], ARGV[1], 1)
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
	redis.call('pexpire', KEYS[1], ARGV[2])
end
return {1, fence_token(KEYS[2], ARGV[4])}
