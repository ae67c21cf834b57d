-- latch_state: what a CountDownLatch's waiter reads at each attempt.
--
-- KEYS[1]  latch hash (see latch_set)
-- KEYS[2]  the latch's mark (see latch_common)
-- ARGV[1]  the generation the waiter saw closed ("" : none yet)
--
-- Returns {count, generation, passed}: the count (0: no latch), the
-- latch's generation ("" : none; "-" : a latch set without one), and what
-- became of generation ARGV[1]: "o" opened, "x" deleted, "" nothing known.
local n = redis.call('hget', KEYS[1], 'n')
local gen = ''
if n then
	gen = redis.call('hget', KEYS[1], 'g') or '-'
end
local passed = ''
if ARGV[1] ~= '' then
	if redis.call('zscore', KEYS[2], 'o:' .. ARGV[1]) then
		passed = 'o'
	elseif redis.call('zscore', KEYS[2], 'x:' .. ARGV[1]) then
		passed = 'x'
	end
end
return {tonumber(n or 0), gen, passed}
