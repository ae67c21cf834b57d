-- multi_acquire: take or re-enter several reentrant exclusive locks of one
-- Client (and, on a Cluster, one slot) at once: all of them or none.
--
-- KEYS[2i-1]  lock hash of part i: owner -> hold count, lease as its PTTL
-- KEYS[2i]    fencing counter of part i (never expires)
-- ARGV[1]     owner ("<client uuid>:<owner id>")
-- ARGV[2]     lease in milliseconds
-- ARGV[3]     "1" to hand out fencing tokens on new acquisitions, "0" not to
-- ARGV[3+i]   hold count the caller believes this owner has on part i
--
-- Returns {1, token_1, ..., token_n}  every part acquired (token as in
--                                      lock_acquire: the counter's value)
--         {0, i, pttl}                 part i is held by another owner;
--                                      nothing was changed
--         {-1, i, n}                   this owner's count on part i is n, not
--                                      what the caller believed; nothing was
--                                      changed
--
-- Idempotent under replay, as lock_acquire: the script is atomic, so either
-- every part's count is one above the caller's belief (this very request
-- already ran) or none is.
local n = #KEYS / 2
local counts = {}
local replay = true
for i = 1, n do
	counts[i] = tonumber(redis.call('hget', KEYS[2 * i - 1], ARGV[1]) or 0)
	if counts[i] ~= tonumber(ARGV[3 + i]) + 1 then
		replay = false
	end
end

local function token(i)
	if ARGV[3] == '1' then
		return tonumber(redis.call('get', KEYS[2 * i]) or 0)
	end
	return 0
end

local out = {1}
if replay then
	for i = 1, n do
		out[i + 1] = token(i)
	end
	return out
end

for i = 1, n do
	if counts[i] ~= tonumber(ARGV[3 + i]) then
		return {-1, i, counts[i]}
	end
end
for i = 1, n do
	if counts[i] == 0 and redis.call('exists', KEYS[2 * i - 1]) == 1 then
		return {0, i, redis.call('pttl', KEYS[2 * i - 1])}
	end
end

for i = 1, n do
	local hash = KEYS[2 * i - 1]
	if counts[i] == 0 then
		redis.call('hset', hash, ARGV[1], 1)
		redis.call('pexpire', hash, ARGV[2])
		if ARGV[3] == '1' then
			out[i + 1] = redis.call('incr', KEYS[2 * i])
		else
			out[i + 1] = 0
		end
	else
		-- Re-entry never shortens the lease the outer hold already has.
		redis.call('hincrby', hash, ARGV[1], 1)
		if redis.call('pttl', hash) < tonumber(ARGV[2]) then
			redis.call('pexpire', hash, ARGV[2])
		end
		out[i + 1] = token(i)
	end
end
return out
