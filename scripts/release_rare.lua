-- include: release_common
-- release_rare: the release helpers that only the rarer paths call (a
-- replay, a hand-over, a clean-up, an RWLock's tail), kept out of
-- release_common so that the common release does not make them: each
-- helper a script defines costs Redis a closure at every run (see
-- scripts.go, includeHerePrefix).

local LATCH_SLOTS = 64

-- release_replay answers a release request whose generation no longer holds:
-- 1 when the latch records op (it already freed the lock: this is a
-- replay), -1 otherwise (the hold was lost before the release; nothing is
-- changed). A Lock's latch is its hash's ~r and full segments (tail is
-- hash; ~p too, the older half that the layout before segments wrote, so
-- that a release replayed across an upgrade is still recognised); another kind's
-- is the slots of its tail, scanned: it is bounded, only a release that
-- finds its generation gone pays for it, and a lock that has had no release
-- for the latch's time (no tail) answers at once. Only the slots count:
-- their names are one character, and no other field's is.
local function release_replay(hash, tail, op)
	if tail == hash then
		for _, r in ipairs(redis.call('hmget', hash, '~r', '~p0', '~p1', '~p2', '~p3', '~p')) do
			if r and string.find(r, '\0' .. op .. '\0', 1, true) then
				return 1
			end
		end
		return -1
	end
	if redis.call('exists', tail) == 0 then
		return -1
	end
	local f = redis.call('hgetall', tail)
	for i = 1, #f, 2 do
		if f[i + 1] == op and #f[i] == 1 then
			return 1
		end
	end
	return -1
end

-- next_slot returns the latch slot of a tail key after s (the latch's
-- last, ~s: read from tail when nil; '' for none yet, followed by '0'),
-- round-robin.
local function next_slot(tail, s)
	s = s or redis.call('hget', tail, '~s') or ''
	return string.char(48 + ((string.byte(s) or 47) - 47) % LATCH_SLOTS)
end

-- owner_fields returns the owner fields of hash: every field that is not
-- metadata ('~'). HGETALL, not HKEYS: the least-privilege ACL of the
-- README allows the one relock uses elsewhere. For a clean-up that does not
-- know the hold's owner (a force release).
local function owner_fields(hash)
	local f, out = redis.call('hgetall', hash), {}
	for i = 1, #f, 2 do
		if string.sub(f[i], 1, 1) ~= '~' then
			out[#out + 1] = f[i]
		end
	end
	return out
end

-- hdel_all deletes fields f of hash, in batches: Lua's unpack has a limit,
-- and a walk past hundreds of dead waiters takes their entries out (see
-- qf_reader).
local function hdel_all(hash, f)
	for i = 1, #f, 1000 do
		redis.call('hdel', hash, unpack(f, i, math.min(i + 999, #f)))
	end
end

-- free_record ends the hold in a Lock's (or FairLock's) hash, which is its
-- own tail: it
-- deletes the hold's fields — owner (its count; nil when the caller does
-- not know it: every owner field), ~g, ~o, ~l and the queue's ~q and ~m —
-- keeping ~t, and the fields listed in more (the queue's entries taken
-- out, see qf_reader) — and records op (nil for none: a clean-up that
-- nobody replays) in the latch, r and n (the hash's ~r and ~n, which the
-- caller read with the hold's fields), and gen, the generation freed, as
-- ~f (see latch_hset); the record then lives the latch's time, ms.
-- Every reader takes a hash without ~g as free.
local function free_record(hash, owner, op, ms, r, n, more, gen)
	local f = more or {}
	if owner then
		f[#f + 1] = owner
	else
		for _, k in ipairs(owner_fields(hash)) do
			f[#f + 1] = k
		end
	end
	for _, k in ipairs({'~g', '~o', '~l', '~q', '~m'}) do
		f[#f + 1] = k
	end
	hdel_all(hash, f)
	if op then
		latch_hset(hash, r, n, op, gen)
	elseif gen then
		redis.call('hset', hash, '~f', gen)
	end
	redis.call('pexpire', hash, ms)
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
		s = next_slot(tail, s)
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
