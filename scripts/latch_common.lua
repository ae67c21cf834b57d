-- include: layout_common timeset_common
-- latch_common: the latch's mark, prepended to every latch_* script; not
-- run on its own.
--
-- The mark, "<prefix>:{name}:latch:past", is a timeset (timeset_common) of
-- what became of the latch's generations once they passed: "o:<gen>"
-- opened by its CountDowns, "x:<gen>" deleted, and "d:<op>" the op id of a
-- Delete that removed a closed latch (its replay reports so), each
-- remembered for at least ARGV's mark lifetime, by the server's clock, at
-- about 8 bytes each. A member states a fact about a generation that never
-- changes (each generation is an op id of its own), so an older one is
-- never wrong. (The sorted set ":latch:done" of versions before cost 120 B
-- or more per opening: 1.4 MB for a latch opened 100 times a second.)

-- latch_now is the server's clock in ms.
local function latch_now()
	local t = redis.call('time')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- latch_mark records member in the mark key for at least ttl ms.
local function latch_mark(key, member, ttl)
	timeset_add(key, member, latch_now(), ttl)
end

-- latch_marked reports whether the mark key records member (written less
-- than ttl ms ago, or at most a slot of the timeset more).
local function latch_marked(key, member, ttl)
	return timeset_has(key, member, latch_now(), ttl)
end
