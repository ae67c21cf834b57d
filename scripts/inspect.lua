-- inspect: a read-only snapshot of every lock type of one name, for
-- (*Client).Inspect. It writes nothing and evicts nothing: the Go side reads
-- the layout (each kind's decode in kinds.go), so this script only gathers
-- raw values in one atomic step, with the server's clock.
--
-- KEYS[i]  the state keys of every kind, in the order of the table of kinds
-- ARGV[i]  the Redis type KEYS[i] has when relock wrote it: hash, zset or
--          string
--
-- Returns {seconds, microseconds,   -- server TIME
--          value 1, pttl 1, value 2, pttl 2, ...}
-- where a hash's value is HGETALL's flat list, a sorted set's its members
-- and scores in order (ZRANGE WITHSCORES), and a string's its content. A
-- key that does not exist, or has another type (not written by relock),
-- reads as absent: {} or "", and pttl -2.

local t = redis.call('time')
local out = {tonumber(t[1]), tonumber(t[2])}
for i, key in ipairs(KEYS) do
	local want = ARGV[i]
	local found = redis.call('type', key)['ok'] == want
	if not found then
		if want == 'hash' or want == 'zset' then
			out[#out + 1] = {}
		else
			out[#out + 1] = ''
		end
		out[#out + 1] = -2
	else
		if want == 'hash' then
			out[#out + 1] = redis.call('hgetall', key)
		elseif want == 'zset' then
			out[#out + 1] = redis.call('zrange', key, 0, -1, 'withscores')
		else
			out[#out + 1] = redis.call('get', key)
		end
		out[#out + 1] = redis.call('pttl', key)
	end
end
return out
