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
