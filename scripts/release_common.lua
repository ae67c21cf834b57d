-- release_common: helpers prepended to the release scripts (see scripts.go).
--
-- The tail is the one key a lock leaves behind when it is free: a hash
-- (KEYS "tail" of the scripts) that lives for the unlock latch's time after
-- its last write (its PTTL, set again at each write). It holds
--   ~t  the token of the last hold freed, so that the next token is above it
--       (next_token, acquire_common);
--   the latch: the op ids of the last LATCH_SLOTS final releases, in fields
--       named by one character each, '0'..'o' (bytes 48 to 47+LATCH_SLOTS),
--       written round-robin (~s names the slot written last), so that a
--       replayed final release (go-redis resending it after a lost reply,
--       or the background retry of a failed Unlock) reports success. A hold
--       granted with a token read ~s with the tail's ~t and carries it
--       (grant_new): its release writes the next slot and ~s with the rest,
--       in one HSET (end_hold); any other release reads ~s first (HGET).
--       The slots are characters, not a count, so that no release turns a
--       number into text (a printf of a double inside Redis, see
--       clock_token); ~s is not the ~n count earlier versions kept, so that
--       a release of either version never misreads the other's field.
-- A latch key per release would make the live keys grow with the release
-- rate (rate × latch time); the tail is one key of bounded size per lock
-- whatever the rate. A release is forgotten once LATCH_SLOTS later final
-- releases of the same lock have been recorded, or once the lock has had no
-- release for the latch's time: a replay later than that reports the hold
-- lost (-1), as a replay after the old latch key's expiry did.
local LATCH_SLOTS = 64

-- release_replay answers a release request whose generation no longer holds:
-- 1 when the tail records op (it already freed the lock: this is a replay),
-- -1 otherwise (the hold was lost before the release; nothing is changed).
-- It scans the tail, which is bounded; only a release that finds its
-- generation gone pays for it, and a lock that has had no release for the
-- latch's time (no tail) answers at once.
local function release_replay(tail, op)
	if redis.call('exists', tail) == 0 then
		return -1
	end
	local f = redis.call('hgetall', tail)
	for i = 1, #f, 2 do
		if f[i + 1] == op and string.sub(f[i], 1, 1) ~= '~' then
			return 1
		end
	end
	return -1
end

-- end_hold writes the tail when a hold ends: op (nil for none: a clean-up
-- that nobody replays) joins the latch, and token (a token's text; '0', nil
-- or false for none) becomes the tail's last token; the tail then lives the
-- latch's time, ms, from now. s, when given, is the latch's last slot (~s)
-- as the hold carries it (see grant_new): then the tail is not read first.
-- Each case names its fields in one HSET rather than building a table for
-- unpack: this runs at every final release, and the table (garbage for
-- Redis's Lua collector) cost more than the branches.
local function end_hold(tail, op, token, ms, s)
	if token == '0' or token == 0 then
		token = nil
	end
	if op then
		s = s or redis.call('hget', tail, '~s') or ''
		-- The slot after s, round-robin; '' (none yet) is followed by '0'.
		s = string.char(48 + ((string.byte(s) or 47) - 47) % LATCH_SLOTS)
		if token then
			redis.call('hset', tail, s, op, '~s', s, '~t', token)
		else
			redis.call('hset', tail, s, op, '~s', s)
		end
	elseif token then
		redis.call('hset', tail, '~t', token)
	else
		return
	end
	redis.call('pexpire', tail, ms)
end

-- free_alone frees an exclusive hold whose fields are cur (as release_hold
-- returns them) when nobody waits for it — no queue (~q), no listener (~m)
-- — leaving its token in the tail, and returns true; false, having done
-- nothing, when someone may: the caller then hands the lock over
-- (free_hold, handover_common). It is the common release, and needs none of
-- the hand-over's helpers (see scripts.go, includeHerePrefix).
local function free_alone(hash, op, tail, cur, ms)
	if cur[4] or cur[5] then
		return false
	end
	redis.call('del', hash)
	end_hold(tail, op, cur[3], ms, cur[7])
	return true
end

-- release_hold applies the rule every exclusive release (Lock, FairLock,
-- MultiLock part) shares. It returns the reply when the request is settled
-- without freeing the lock — the generation is gone (-1, or 1 for a replay
-- that the tail's latch records), op already ran (0), or a re-entry's
-- release (0) — or nil and the hold's fields {~g, ~o, ~t, ~q, ~m, ~l, ~s}
-- when the caller must free the lock now. Each kind of release reads only
-- the fields it uses: every value HMGET finds costs Redis about 0.1 µs
-- (issue 29), and a final release has no use for the owner's count.
local function release_hold(hash, owner, op, gen, final, tail)
	local cur
	if final == '1' then
		cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l', '~s')
	else
		cur = redis.call('hmget', hash, '~g', '~o', owner)
	end
	if cur[1] ~= gen then
		return release_replay(tail, op)
	end
	if cur[2] == op then
		return 0
	end
	if final ~= '1' then
		local count = tonumber(cur[3] or 0)
		if count > 1 then
			redis.call('hset', hash, owner, count - 1, '~o', op)
		else
			redis.call('hset', hash, '~o', op)
		end
		return 0
	end
	return nil, cur
end
