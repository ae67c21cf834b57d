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
local LATCH_SLOTS = 64
local LOCK_LATCH_SEG = 8
local LOCK_LATCH_OLD = {'~p', '~p1', '~p2', '~p3'}

-- latch_add records op in a Lock's latch. The latch is segments of
-- LOCK_LATCH_SEG op ids: ~r the newest, being filled, and the full ones in
-- the fields of LOCK_LATCH_OLD, written round-robin, so that a Lock
-- remembers at least its last 32 final releases (4 full segments) and at
-- most 40. A segment is each op id after a NUL, and a closing NUL (op ids
-- never contain NUL: "<client id>:<n>"). ~n is two bytes: the count of ~r,
-- and the index in LOCK_LATCH_OLD that the next full ~r goes to. A release
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
		i = (i or 0) % #LOCK_LATCH_OLD
	end
	if r and c > 0 and c < LOCK_LATCH_SEG then
		return r .. op .. '\0', string.char(c + 1, i)
	end
	if r and c > 0 then
		return '\0' .. op .. '\0', string.char(1, (i + 1) % #LOCK_LATCH_OLD), LOCK_LATCH_OLD[i + 1], r
	end
	return '\0' .. op .. '\0', string.char(1, i)
end

-- latch_hset writes op into the latch of hash, whose ~r and ~n are r and
-- n (see latch_add), in one HSET.
local function latch_hset(hash, r, n, op)
	local r2, n2, pf, p = latch_add(r, n, op)
	if pf then
		redis.call('hset', hash, '~r', r2, '~n', n2, pf, p)
	else
		redis.call('hset', hash, '~r', r2, '~n', n2)
	end
end

-- release_replay answers a release request whose generation no longer holds:
-- 1 when the latch records op (it already freed the lock: this is a
-- replay), -1 otherwise (the hold was lost before the release; nothing is
-- changed). A Lock's latch is its hash's ~r (tail is hash); another kind's
-- is the slots of its tail, scanned: it is bounded, only a release that
-- finds its generation gone pays for it, and a lock that has had no release
-- for the latch's time (no tail) answers at once. Only the slots count:
-- their names are one character, and no other field's is.
local function release_replay(hash, tail, op)
	if tail == hash then
		for _, r in ipairs(redis.call('hmget', hash, '~r', unpack(LOCK_LATCH_OLD))) do
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
-- caller read with the hold's fields); the record then lives the latch's time, ms.
-- Every reader takes a hash without ~g as free.
local function free_record(hash, owner, op, ms, r, n, more)
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
		latch_hset(hash, r, n, op)
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
	latch_hset(hash, cur[7], cur[8], op)
	redis.call('pexpire', hash, ms)
	return true
end

-- release_hold applies the rule every exclusive release (Lock, FairLock,
-- MultiLock part) shares. It returns the reply when the request is settled
-- without freeing the lock — the generation is gone (-1, or 1 for a replay
-- that the tail's latch records), op already ran (0), or a re-entry's
-- release (0) — or nil and the hold's fields {~g, ~o, ~t, ~q, ~m, ~l, and
-- the latch's: ~r and ~n, a Lock's latch (tail is hash), or ~s, the slot
-- another kind's hold carries} when the caller must free the lock now. Each kind of release reads only
-- the fields it uses: every value HMGET finds costs Redis about 0.1 µs
-- (issue 29), and a final release has no use for the owner's count.
local function release_hold(hash, owner, op, gen, final, tail)
	local cur
	if final == '1' then
		if tail == hash then
			cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l', '~r', '~n')
		else
			cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l', '~s')
		end
	else
		cur = redis.call('hmget', hash, '~g', '~o', owner)
	end
	if cur[1] ~= gen then
		return release_replay(hash, tail, op)
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
