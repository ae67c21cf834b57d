-- rw_common: helpers prepended to every rw_* script; not run on its own.
--
-- An RWLock is one hash. Each holder has a count field and a deadline field
-- (server milliseconds), so that every hold expires on its own lease, and
-- the generation and last op of its hold (the replay contract of
-- acquire_common):
--   r:<owner>  read holds      rd:<owner>  read deadline
--   rg:<owner> read generation ro:<owner>  last read op
--   w:<owner>  write holds     wd:<owner>  write deadline
--   wg:<owner> write generation wo:<owner> last write op
--   ~t         fencing token of the last write hold
-- The hash's PTTL is the latest deadline, so it disappears with its last
-- holder. A holder whose deadline has passed (its process died) is evicted
-- by the next script that looks. Waiting writers are a sorted set owner ->
-- deadline of their claim, renewed at every attempt. Times come from the
-- server (TIME), so clock skew between processes does not matter.

local function now_ms()
	local t = redis.call('time')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- fields returns the count, deadline, generation and last-op fields of
-- owner's holds of kind ("r" or "w").
local function fields(kind, owner)
	return kind .. ':' .. owner, kind .. 'd:' .. owner, kind .. 'g:' .. owner, kind .. 'o:' .. owner
end

-- drop removes every field of owner's hold of kind.
local function drop(hash, kind, owner)
	redis.call('hdel', hash, fields(kind, owner))
end

-- scan evicts expired holders (when evict is true) and returns the state:
-- readers (owners with read holds), writer (owner of the write hold or nil)
-- and the latest live deadline.
local function scan(hash, now, evict)
	local all = redis.call('hgetall', hash)
	local st = {readers = 0, writer = nil, maxdl = 0}
	for i = 1, #all, 2 do
		local kind, owner = string.match(all[i], '^(%a+):(.*)$')
		if kind == 'rd' or kind == 'wd' then
			local dl = tonumber(all[i + 1])
			if dl <= now then
				if evict then
					drop(hash, string.sub(kind, 1, 1), owner)
				end
			else
				if kind == 'rd' then
					st.readers = st.readers + 1
				else
					st.writer = owner
				end
				if dl > st.maxdl then
					st.maxdl = dl
				end
			end
		end
	end
	return st
end

-- settle makes the hash live exactly as long as its latest holder, and
-- reports whether the lock is free. A free lock's hash goes; its last write
-- token stays in the tail for the unlock latch's time (ms).
local function settle(hash, st, now, tail, ms)
	if st.readers == 0 and st.writer == nil then
		local token = redis.call('hget', hash, '~t')
		redis.call('del', hash)
		if token and tonumber(token) > 0 then
			redis.call('set', tail, token, 'px', ms)
		end
		return true
	end
	redis.call('pexpire', hash, st.maxdl - now)
	return false
end

-- extend pushes deadline field df to now + lease (never shortening it) and
-- the hash's TTL to at least lease.
local function extend(hash, df, lease, now)
	local dl = now + lease
	if dl > tonumber(redis.call('hget', hash, df) or 0) then
		redis.call('hset', hash, df, dl)
	end
	if redis.call('pttl', hash) < lease then
		redis.call('pexpire', hash, lease)
	end
end

-- grant starts a new hold of kind for owner, generation op: any leftover of
-- an older generation of the owner's (a hold its Client ended already, or
-- one resumed with WithOwner) is taken over.
local function grant(hash, kind, owner, op, lease, now)
	local cf, df, gf, of = fields(kind, owner)
	redis.call('hset', hash, cf, 1, df, now + lease, gf, op, of, op)
	if redis.call('pttl', hash) < lease then
		redis.call('pexpire', hash, lease)
	end
end

-- reenter adds one hold to generation gen of owner's hold of kind; nil when
-- that generation no longer holds (lost).
local function reenter(hash, kind, owner, gen, op, lease, now)
	local cf, df, gf, of = fields(kind, owner)
	if redis.call('hget', hash, gf) ~= gen then
		return nil
	end
	local count = redis.call('hincrby', hash, cf, 1)
	redis.call('hset', hash, of, op)
	extend(hash, df, lease, now)
	return count
end

-- seen answers an acquire of kind without looking at the other holders when
-- it can: a replay of the owner's last op (cur: HMGET of its count and
-- last-op fields) gets the reply it had, a re-entry of generation gen gets
-- its count (or {-1, 0} when the generation is gone). token is the token to
-- reply with. nil: a new acquisition, left to the caller.
local function seen(hash, kind, owner, op, gen, lease, now, cur, token)
	if cur[2] == op then
		return {1, token, tonumber(cur[1] or 0)}
	end
	if gen == '' then
		return nil
	end
	local count = reenter(hash, kind, owner, gen, op, lease, now)
	if not count then
		return {-1, 0}
	end
	return {1, token, count}
end

-- waiting reports whether a writer waits, after evicting stale claims.
local function waiting(writers, now)
	redis.call('zremrangebyscore', writers, '-inf', now)
	return redis.call('zcard', writers) > 0
end

-- announce tells waiters that holds ended: when the lock is free a waiting
-- writer goes first; readers are woken only when no writer waits, since
-- they would queue behind it anyway.
local function announce(pub, rch, wch, free, writersWait)
	if writersWait then
		if free then
			redis.call(pub, wch, '1')
		end
	else
		redis.call(pub, rch, 'all')
		if free then
			redis.call(pub, wch, '1')
		end
	end
end
