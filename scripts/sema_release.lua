-- include: acquire_rare sema_common
-- sema_release: give back the permits of one hold of a Semaphore, and hand
-- them on, in the same call, to the waiters at the head of the queue they
-- serve (see sema_serve): only those wake.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  tail, "<prefix>:{name}:sema:last": the latch of the releases
--          (see below) and the force releases' answers (force_common)
-- KEYS[3]  its holds by deadline (":sema:d")
-- KEYS[4]  its queue (":sema:q")
-- KEYS[5]  its claims by deadline (":sema:c")
-- ARGV[1]  generation of the hold
-- ARGV[2]  op id of this request
-- ARGV[3]  publish command
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns 1 released (also for a replay the latch records), -1 the hold
-- was gone (lost; nothing changed but the reclaim of ended holds).
--
-- The latch is bounded by time, not by a count of releases (a busy
-- semaphore fills any count in milliseconds): every release of the last
-- latch lifetime is recorded in the tail, whatever their number, as
--   r:<op>    the server time (ms) of release op, looked up by a replay
--   i:<seq>   "<time>:<op>" of the seq-th release, in order, for forgetting
--   ~n        the seq of the last release recorded
--   ~h        the seq of the oldest release still recorded
-- Each release records itself and forgets at most two releases older than
-- the latch, from the oldest on: O(1) each, and the tail holds the
-- releases of one latch lifetime (plus those of the last write's latch
-- lifetime, when releases stop: the tail then expires).

-- SEMA_FORGET is how many old releases one release forgets at most: more
-- than one, so that the record catches up after a burst.
local SEMA_FORGET = 2

-- sema_latch_has reports whether the tail records release op within the
-- latch (ms) before now.
local function sema_latch_has(tail, op, now, ms)
	local t = tonumber(redis.call('hget', tail, 'r:' .. op) or 0)
	return t > 0 and t + tonumber(ms) > now
end

-- sema_latch_add records release op at now, forgets releases older than
-- the latch (ms), and keeps the tail for the latch's time.
local function sema_latch_add(tail, op, now, ms)
	local f = redis.call('hmget', tail, '~n', '~h')
	local seq, h = tonumber(f[1] or 0) + 1, tonumber(f[2] or 1)
	local start, oldest = h, now - tonumber(ms)
	for _ = 1, SEMA_FORGET do
		local v = h < seq and redis.call('hget', tail, 'i:' .. h)
		local t, old
		if v then
			t, old = string.match(v, '^(%d+):(.*)$')
		end
		if not t or tonumber(t) > oldest then
			break
		end
		redis.call('hdel', tail, 'i:' .. h, 'r:' .. old)
		h = h + 1
	end
	if h ~= start or seq == 1 then
		redis.call('hset', tail, 'i:' .. seq, now .. ':' .. op, 'r:' .. op, now, '~n', seq, '~h', h)
	else
		redis.call('hset', tail, 'i:' .. seq, now .. ':' .. op, 'r:' .. op, now, '~n', seq)
	end
	redis.call('pexpire', tail, ms)
end

local k = {h = KEYS[1], d = KEYS[3], q = KEYS[4], c = KEYS[5]}
local st = sema_open(k, math.floor(now_us() / 1000))
if not st.cap or not sema_drop(st, ARGV[1]) then
	if sema_latch_has(KEYS[2], ARGV[2], st.now, ARGV[4]) then
		return 1
	end
	return -1
end
sema_serve(st, ARGV[3], ARGV[5], nil)
sema_wake_head(st, ARGV[3], nil)
sema_store(st)
sema_latch_add(KEYS[2], ARGV[2], st.now, ARGV[4])
return 1
