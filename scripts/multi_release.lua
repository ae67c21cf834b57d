-- multi_release: release one hold on each of several reentrant exclusive
-- locks of one Client (and, on a Cluster, one slot), each independently: a
-- part that is not held does not keep the others from being released.
--
-- KEYS[3i-2]  lock hash of part i
-- KEYS[3i-1]  unlock channel of part i
-- KEYS[3i]    latch key of this request for part i
-- ARGV[1]     owner
-- ARGV[2]     publish command: "publish" or "spublish"
-- ARGV[3]     latch lifetime in milliseconds
-- ARGV[4]     message to publish ("1": wake one waiter)
-- ARGV[4+i]   hold count the caller believes this owner has on part i (>= 1)
--
-- Returns one integer per part, as lock_release: 1 the part is free now, 0
-- one hold released and the owner keeps the rest, -1 the owner did not hold
-- what the caller believed (nothing changed for that part).
--
-- Idempotent under replay, per part, exactly as lock_release.
local out = {}
for i = 1, #KEYS / 3 do
	local hash, channel, latch = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
	local count = tonumber(redis.call('hget', hash, ARGV[1]) or 0)
	local believed = tonumber(ARGV[4 + i])
	if count == believed then
		if count > 1 then
			redis.call('hincrby', hash, ARGV[1], -1)
			out[i] = 0
		else
			redis.call('del', hash)
			redis.call(ARGV[2], channel, ARGV[4])
			redis.call('set', latch, '1', 'px', ARGV[3])
			out[i] = 1
		end
	else
		out[i] = replayed_release(count, believed, latch) -- release_common.lua
	end
end
return out
