-- include: layout_common
-- latch_common: the latch's mark, prepended to latch_count_down and
-- latch_delete; not run on its own.
--
-- The mark, "<prefix>:{name}:latch:done", is a sorted set of what became
-- of the latch's generations once they passed: "o:<gen>" opened by its
-- CountDowns, "x:<gen>" deleted, and "d:<op>" the op id of a Delete that
-- removed a closed latch (its replay reports so). Each entry is scored by
-- the server's clock in ms. An entry lives at least ARGV's mark lifetime:
-- a write drops the entries older than that and sets the key's PTTL to it.
-- An entry states a fact about a generation that never changes (each
-- generation is an op id of its own), so an older one is never wrong.

-- latch_mark records member in the mark key for at least ttl ms.
local function latch_mark(key, member, ttl)
	local t = redis.call('time')
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	redis.call('zremrangebyscore', key, '-inf', now - tonumber(ttl))
	redis.call('zadd', key, now, member)
	redis.call('pexpire', key, ttl)
end
