-- rw_write_acquire: take or re-enter the write hold, or claim the next turn.
--
-- KEYS[1]  lock hash (see rw_common)
-- KEYS[2]  waiting writers: sorted set owner -> claim deadline
-- KEYS[3]  tail: the last released write hold's token
-- ARGV[1]  owner
-- ARGV[2]  op id of this request
-- ARGV[3]  generation of the owner's write hold ("" : new)
-- ARGV[4]  lease in milliseconds
-- ARGV[5]  "1" to hand out a fencing token on a new acquisition, "0" not to
-- ARGV[6]  waiter timeout in milliseconds: how long the claim lives unless
--          renewed by the next attempt
--
-- Returns {1, token, count}  acquired
--         {0, wait}          held by others: this owner's claim is recorded
--                            (new readers now queue behind it); wait is the
--                            time until the latest hold's deadline, in ms
--         {-1, 0}            the caller's generation no longer holds (lost)
--         {-2, 0}            this owner holds a read hold: an upgrade would
--                            deadlock, nothing was changed
--
-- Idempotent under replay: a request whose op id is the owner's last write
-- op already ran; a claim is recorded once per owner.
local hash, owner, op, gen = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local lease = tonumber(ARGV[4])
local now = now_ms()
local st = scan(hash, now, true)
local cf, df, gf, of = fields('w', owner)
local cur = redis.call('hmget', hash, cf, of, '~t')
local reply = seen(hash, 'w', owner, op, gen, lease, now, cur, tonumber(cur[3] or 0))
if reply then
	return reply
end
if redis.call('hexists', hash, 'r:' .. owner) == 1 then
	return {-2, 0}
end
if (st.writer == nil and st.readers == 0) or st.writer == owner then
	redis.call('zrem', KEYS[2], owner)
	local token = 0
	if ARGV[5] == '1' then
		token = next_token(KEYS[3], cur[3])
	end
	grant(hash, 'w', owner, op, lease, now)
	redis.call('hset', hash, '~t', fmt(token))
	return {1, token, 1}
end
local timeout = tonumber(ARGV[6])
redis.call('zadd', KEYS[2], now + timeout, owner)
if redis.call('pttl', KEYS[2]) < timeout then
	redis.call('pexpire', KEYS[2], timeout)
end
return {0, st.maxdl - now}
