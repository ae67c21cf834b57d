-- include: layout_common
-- release_common: helpers prepended to the release scripts (see scripts.go).
--
-- A lock that is free keeps, for the unlock latch's time after its last
-- release (the PTTL, set again at each release), a record of
--   ~t  the token of the last hold freed, so that the next token is above it
--       (next_token, acquire_common);
--   the latch: the op ids of the last LATCH_SLOTS final releases, so that a
--       replayed final release (go-redis resending it after a lost reply,
--       or the background retry of a failed Unlock) reports success.
-- A Lock, and a FairLock, keeps that record in its own hash (a free Lock
-- is one key: its hash without a hold's fields, see free_record), the
-- latch in a few segments (~r, ~n and the full ones, see latch_add): a
-- hold granted on the hash keeps ~t and the latch beside its own fields,
-- its release reads ~r with the rest and writes it back in one HSET, and
-- no key is made or deleted per hold. While a hold lives the record shares
-- its lease: a hold whose lease runs out takes the record with it, and the
-- tokens after it rest on the clock, as after Redis forgot (next_token).
-- RWLock keeps the record in a key of its own (KEYS "tail" of its
-- scripts), the latch in fields named by one character each,
-- '0'..'o' (bytes 48 to 47+LATCH_SLOTS), written round-robin (~s names the
-- slot written last; not the ~n count earlier versions kept, so that a
-- release of either version never misreads the other's field): a hold
-- granted with a token reads ~s with the tail's ~t and carries it
-- (grant_new), and its release writes the next slot and ~s with the rest,
-- in one HSET (end_hold); any other release reads ~s first (HGET). The
-- slots are characters, not a count, so that no release turns a number
-- into text (a printf of a double inside Redis, see clock_token).
-- A latch key per release would make the live keys grow with the release
-- rate (rate × latch time); the record is of bounded size per lock
-- whatever the rate. A release is forgotten once LATCH_SLOTS later final
-- releases of the same lock have been recorded, or once the lock has had no
-- release for the latch's time: a replay later than that reports the hold
-- lost (-1), as a replay after the old latch key's expiry did.
local LOCK_LATCH_SEG = 8
local LOCK_LATCH_OLD = 4

-- latch_add records op in a Lock's latch. The latch is segments of
-- LOCK_LATCH_SEG op ids: ~r the newest, being filled, and the full ones in
-- LOCK_LATCH_OLD fields ~p0, ~p1, ..., written round-robin, so that a Lock
-- remembers at least its last 32 final releases (4 full segments) and at
-- most 40. A segment is each op id after a NUL, and a closing NUL (op ids
-- never contain NUL: "<client id>:<n>"). ~n is two bytes: the count of ~r,
-- and the index of the ~p field that the next full ~r goes to. A release
-- reads and rewrites ~r alone, a few hundred bytes at most: every byte a
-- script reads or makes costs Redis (its copies, and Lua's garbage
-- collector), and a segment per field, not one field per release, keeps
-- the fields few (every command walks past each field of a small hash).
-- Given r and n (the hash's ~r and ~n; false or nil for none yet) it
-- returns the new ~r and ~n, and, when r was full, the field r goes to and
-- r itself, else nil.
local function latch_add(r, n, op)
	local c, i = 0, 0
	if n then
		c, i = string.byte(n, 1, 2)
		i = (i or 0) % LOCK_LATCH_OLD
	end
	if r and c > 0 and c < LOCK_LATCH_SEG then
		return r .. op .. '\0', string.char(c + 1, i)
	end
	if r and c > 0 then
		return '\0' .. op .. '\0', string.char(1, (i + 1) % LOCK_LATCH_OLD), '~p' .. string.char(48 + i), r
	end
	return '\0' .. op .. '\0', string.char(1, i)
end

-- latch_hset writes op into the latch of hash, whose ~r and ~n are r and
-- n (see latch_add), and gen, the generation the release freed, as ~f, in
-- one HSET. An acquire whose op id is ~f takes nothing: it is a copy of the
-- request that started that hold, sent again by go-redis (a read that timed
-- out) or by the Client (lockCall.awaitResend), whose first copy reaches
-- Redis only after the hold has ended. Only the last freed generation is
-- kept: a copy later than the next hold's release is not fenced.
local function latch_hset(hash, r, n, op, gen)
	local r2, n2, pf, p = latch_add(r, n, op)
	if pf then
		redis.call('hset', hash, '~r', r2, '~n', n2, '~f', gen, pf, p)
	else
		redis.call('hset', hash, '~r', r2, '~n', n2, '~f', gen)
	end
end

-- free_alone frees the hold of owner whose fields are cur (as release_hold
-- returns them) when nobody waits for it — no queue (~q), no listener (~m)
-- — leaving its token and latch in the hash, its own tail (see
-- free_record), and returns true; false, having done nothing, when someone
-- may: the caller then hands the lock over (free_hold, handover_common). It
-- is the common release, and needs none of the hand-over's helpers (see
-- scripts.go, includeHerePrefix).
local function free_alone(hash, owner, op, cur, ms)
	if cur[4] or cur[5] then
		return false
	end
	-- The HDEL names only the fields a hold without waiters has.
	redis.call('hdel', hash, owner, '~g', '~o', '~l')
	latch_hset(hash, cur[7], cur[8], op, cur[1])
	redis.call('pexpire', hash, ms)
	return true
end

-- release_hold applies the rule every exclusive release (Lock, FairLock,
-- MultiLock part) shares. It returns the reply when the request is settled
-- without freeing the lock — op already ran (0), or a re-entry's release
-- (0); nil and nil when the generation is gone (the caller answers with
-- release_replay, release_rare, which the common release does not make);
-- or nil and the hold's fields {~g, ~o, ~t, ~q, ~m, ~l, and the latch's:
-- ~r and ~n, a Lock's latch (tail is hash), or ~s, the slot another kind's
-- hold carries} when the caller must free the lock now. Each kind of
-- release reads only the fields it uses: every value HMGET finds costs
-- Redis about 0.1 µs, and a final release has no use for the owner's
-- count. ahead (a Lock's release; nil: none) is one more field read by the
-- same HMGET, at cur[9]: the queue entry the hold's Client expects at the
-- head (see qf_reader), which saves a hand-over its second HMGET.
local function release_hold(hash, owner, op, gen, final, tail, ahead)
	local cur, v
	if final == '1' then
		if ahead then
			cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l', '~r', '~n', ahead, '~v')
			v, cur[10] = cur[10], nil
		elseif tail == hash then
			cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l', '~r', '~n', '~v')
			v, cur[9] = cur[9], nil
		else
			cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l', '~s', '~v')
			v, cur[8] = cur[8], nil
		end
	else
		cur = redis.call('hmget', hash, '~g', '~o', owner, '~v')
		v = cur[4]
	end
	layout_check(v, hash)
	if cur[1] ~= gen then
		return nil, nil
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
