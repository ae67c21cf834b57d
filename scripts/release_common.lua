-- release_common: helpers prepended to the release scripts (see scripts.go).

-- release_replay answers a release request whose generation no longer holds:
-- 1 when the request's own latch exists (it already freed the lock: this is
-- go-redis resending it), -1 otherwise (the hold was lost before the
-- release; nothing is changed).
local function release_replay(latch)
	if redis.call('exists', latch) == 1 then
		return 1
	end
	return -1
end

-- end_hold writes what outlives a free lock for the unlock latch's time: the
-- request's latch (so its replay reports success) and the tail (the last
-- token, so the next one is above it).
local function end_hold(latch, tail, token, ms)
	redis.call('set', latch, '1', 'px', ms)
	if token and tonumber(token) > 0 then
		redis.call('set', tail, token, 'px', ms)
	end
end

-- release_hold applies the rule every exclusive release (Lock, FairLock,
-- MultiLock part) shares. It returns the reply when the request is settled
-- without freeing the lock — the generation is gone (-1, or 1 for a replay
-- whose latch exists), op already ran (0), or a re-entry's release (0) — or
-- nil and the hold's fields {~g, ~o, ~t, ~q, ~m, ~l} when the caller must
-- free the lock now.
local function release_hold(hash, owner, op, gen, final, latch)
	local cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l')
	if cur[1] ~= gen then
		return release_replay(latch)
	end
	if cur[2] == op then
		return 0
	end
	if final ~= '1' then
		if tonumber(redis.call('hget', hash, owner) or 0) > 1 then
			redis.call('hincrby', hash, owner, -1)
		end
		redis.call('hset', hash, '~o', op)
		return 0
	end
	return nil, cur
end
