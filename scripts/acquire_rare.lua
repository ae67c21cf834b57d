-- include: acquire_common
-- acquire_rare: the acquire helpers that only the rarer paths call (a
-- re-entry, a hand-over, a kind that reads the clock itself), kept out of
-- acquire_common so that the common acquire does not make them (see
-- release_rare).

-- now_us is the server's clock in microseconds.
local function now_us()
	local t = redis.call('time')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- next_token returns a fencing token above every token this lock name has
-- handed out that Redis still knows of (last: the current hold's ~t, and the
-- tail's ~t, left by the last release: see release_common; a Lock's tail is
-- its hash, whose ~t is last), and at least the server's clock in µs, so
-- that tokens keep increasing when Redis forgets (a restart without
-- persistence, a failover to a replica that missed writes, eviction) as long
-- as the server clocks do not step back by more than the time that took.
-- now, when given, is the clock read already by the script (now_us); else
-- the clock is read here, and the token's text is returned too (see
-- clock_token). tail nil skips the tail's read: for a caller whose last is
-- the token of a live hold (see hand_over), which is above the tail's
-- already.
local function next_token(tail, last, now)
	local prev = tonumber(last or 0)
	if tail then
		prev = math.max(prev, tonumber(redis.call('hget', tail, '~t') or 0))
	end
	if not now then
		return clock_token(prev)
	end
	if now > prev then
		return now
	end
	return prev + 1
end

-- reenter_hold adds one hold to generation gen of an exclusive hold and
-- returns {1, token, count} (the same for a replay of op), or {-1, 0} when
-- gen no longer holds. A re-entry never shortens the lease the hold has; a
-- longer one raises ~l with the PTTL, in the same HSET (see hand_over: a
-- waiter may now be told this lease, and a hand-over to a shorter one must
-- wake it).
local function reenter_hold(hash, owner, op, gen, lease)
	local cur = redis.call('hmget', hash, '~g', '~o', '~t', owner, '~l', '~v')
	layout_check(cur[6], hash)
	cur[6] = nil
	if cur[1] ~= gen then
		return {-1, 0}
	end
	if last_op(cur[2], cur[1]) == op then
		return {1, tonumber(cur[3] or 0), tonumber(cur[4] or 0)}
	end
	local count = tonumber(cur[4] or 0) + 1
	if tonumber(lease) > tonumber(cur[5] or 0) then
		redis.call('hset', hash, owner, count, '~o', op, '~l', lease)
	else
		redis.call('hset', hash, owner, count, '~o', op)
	end
	if redis.call('pttl', hash) < tonumber(lease) then
		redis.call('pexpire', hash, lease)
	end
	return {1, tonumber(cur[3] or 0), count}
end
