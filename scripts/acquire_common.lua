-- include: layout_common
-- acquire_common: helpers prepended to the acquire scripts (see scripts.go).
--
-- The replay contract shared by every lock type: a hold is one generation,
-- named by the op id of the acquire that started it (field ~g, or per owner
-- in an RWLock); every mutating request carries an op id of its own, and the
-- last one applied is recorded (~o). A replayed request (go-redis resent it
-- after losing the reply) is recognised by its op id, never by arithmetic
-- on counts, which a local lease end or a late reply can make ambiguous.

-- fmt writes a token (a double holding an integer up to 2^53) in full:
-- Lua's default conversion would round it to 14 digits.
local function fmt(n)
	return string.format('%.0f', n)
end

-- clock_token is next_token(nil, prev) for a new hold, returned both as a
-- token for the reply and as its decimal text (for the hash). prev is the
-- last token as a number, or as the hash keeps it, its text (nil: none).
-- When the clock is above prev, as it nearly always is, the text is TIME's
-- own two strings, seconds and zero-padded microseconds, and a prev given
-- as text is compared with it as text (decimal integers without leading
-- zeros order by length, then character by character): every number a
-- script turns into text (string.format, or a number passed to
-- redis.call) costs Redis a printf of a double, and every text it turns
-- into a number a strtod, the dearest steps of an uncontended acquire's
-- Lua after the commands themselves. The token is replied as a number: a
-- text reply would cost the Client an allocation more per Lock.
local function clock_token(prev)
	local c = redis.call('time')
	local us = c[2]
	if #us < 6 then
		us = string.sub('00000' .. us, -6)
	end
	local text = c[1] .. us
	if type(prev) == 'number' then
		local now = c[1] * 1000000 + c[2]
		if now > prev then
			return now, text
		end
	elseif not prev or #prev < #text or (#prev == #text and prev < text) then
		return c[1] * 1000000 + c[2], text
	else
		prev = tonumber(prev)
	end
	return prev + 1, fmt(prev + 1)
end

-- grant_new starts a new exclusive hold (Lock, FairLock, MultiLock part):
-- count 1, generation op, a new token above last (the hash's ~t). It
-- overwrites a leftover of the owner's own, since one owner's fields are
-- all such a hash has. The hash is its own tail (see release_common): the
-- hold keeps the record's latch beside its fields; without a token it
-- keeps the record's ~t, so that the next hold with one is above it. A
-- hold starts without ~o: the last op applied is then the one that
-- started it, ~g (see last_op), and a held hash stays one field leaner.
local function grant_new(hash, owner, op, lease, fencing, last)
	-- The fields are named in the HSET, not put in a table for unpack: this
	-- runs at every new hold. The count is the string '1', not the number:
	-- see clock_token.
	local token, text = 0, last or '0'
	if fencing == '1' then
		token, text = clock_token(last)
	end
	redis.call('hset', hash, owner, '1', '~g', op, '~t', text, '~l', lease)
	redis.call('pexpire', hash, lease)
	return token
end

-- last_op returns the op id last applied to an exclusive hold, given its
-- ~o and ~g: a hold that has applied no op since it started (a Lock's, see
-- grant_new) has no ~o, and the op that started it is its generation.
local function last_op(o, g)
	return o or g
end

-- replay_or_read is the start of an exclusive lock's acquire (Lock's and
-- FairLock's), before either looks at its queue. A re-entry (gen set)
-- gets nil and nil: the caller answers it with reenter_hold (acquire_rare,
-- which the common acquire does not make), and it never waits in the
-- queue, the owner holding the lock already. A request whose op id is the
-- last applied (a replay, or the claim of a grant that reached its waiter
-- late) gets its lease counted from now and the hold's reply. Otherwise it
-- returns nil and the hash's fields {owner's count, ~o, ~t, ~g, ~q, extra,
-- nil, ~x, ~f} for the acquire to go on with; extra (nil: none) is one more
-- field the caller reads in the same HMGET (Lock: the waiter's place in
-- the queue, see queue_common), ~x the hash's void marks (void_common),
-- and ~f the generation the last release freed (see latch_hset): an
-- acquire whose op id is either takes nothing.
local function replay_or_read(hash, owner, op, gen, lease, extra)
	if gen ~= '' then
		return nil, nil
	end
	local cur
	if extra then
		cur = redis.call('hmget', hash, owner, '~o', '~t', '~g', '~q', extra, '~v', '~x', '~f')
		layout_check(cur[7], hash)
		cur[7] = nil
	else
		cur = redis.call('hmget', hash, owner, '~o', '~t', '~g', '~q', '~v', '~x', '~f')
		layout_check(cur[6], hash)
		cur[6], cur[7], cur[8], cur[9] = nil, nil, cur[7], cur[8]
	end
	if last_op(cur[2], cur[4]) == op then
		-- The lease is counted from now for the caller (a waiter claiming a
		-- grant that reached it late counts the hold's end from this
		-- attempt): make it true, never shortening it. The PEXPIRE is
		-- written even when it changes nothing, so that a WAIT after this
		-- claim (WithReplicas) covers the hand-over's writes, made by
		-- another connection. lease goes as the caller's text when it is
		-- the longer, as it is at a claim (see clock_token).
		local ttl = redis.call('pttl', hash)
		if ttl < tonumber(lease) then
			ttl = lease
		end
		redis.call('pexpire', hash, ttl)
		return {1, tonumber(cur[3] or 0), tonumber(cur[1] or 0)}
	end
	return nil, cur
end
