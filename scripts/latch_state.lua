-- include: latch_common
-- latch_state: what a CountDownLatch's waiter reads at each attempt.
--
-- KEYS[1]  latch hash (see latch_set)
-- KEYS[2]  the latch's mark (see latch_common)
-- ARGV[1]  the generation the waiter saw closed ("" : none yet)
-- ARGV[2]  the mark's lifetime in ms
--
-- Returns {count, generation, passed}: the count (0: no latch), the
-- latch's generation ("" : none; "-" : a latch set without one), and what
-- became of generation ARGV[1]: "o" opened, "x" deleted, "" nothing known.
local f = redis.call('hmget', KEYS[1], 'n', 'g', '~v')
layout_check(f[3], KEYS[1])
local n = f[1]
local gen = ''
if n then
	gen = f[2] or '-'
end
local passed = ''
if ARGV[1] ~= '' then
	if latch_marked(KEYS[2], 'o:' .. ARGV[1], ARGV[2]) then
		passed = 'o'
	elseif latch_marked(KEYS[2], 'x:' .. ARGV[1], ARGV[2]) then
		passed = 'x'
	end
end
return {tonumber(n or 0), gen, passed}
