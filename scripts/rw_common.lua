-- rw_common: helpers prepended to every rw_* script; not run on its own.
--
-- An RWLock is one hash. Each holder has a count field and a deadline field
-- (server milliseconds), so that every hold expires on its own lease:
--   r:<owner>  read holds      rd:<owner>  read deadline
--   w:<owner>  write holds     wd:<owner>  write deadline
-- The hash's PTTL is the latest deadline, so it disappears with its last
-- holder. A holder whose deadline has passed (its process died) is evicted
-- by the next script that looks. Waiting writers are a sorted set owner ->
-- deadline of their claim, renewed at every attempt. Times come from the
-- server (TIME), so clock skew between processes does not matter.

local function now_ms()
	local t = redis.call('time')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
					redis.call('hdel', hash, all[i], string.sub(kind, 1, 1) .. ':' .. owner)
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
-- reports whether the lock is free.
local function settle(hash, st, now)
	if st.readers == 0 and st.writer == nil then
		redis.call('del', hash)
		return true
	end
	redis.call('pexpire', hash, st.maxdl - now)
	return false
end

-- hold adds one hold: count field cf, deadline field df, lease ms.
local function hold(hash, cf, df, lease, now)
	redis.call('hincrby', hash, cf, 1)
	local dl = now + lease
	local cur = tonumber(redis.call('hget', hash, df) or 0)
	if dl > cur then
		-- Re-entry never shortens the lease the hold already has.
		redis.call('hset', hash, df, dl)
	end
	if redis.call('pttl', hash) < lease then
		redis.call('pexpire', hash, lease)
	end
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
