-- fair_common: helpers prepended to every fair_* script; not run on its own.
--
-- A FairLock keeps its waiters in a list (the order) and a sorted set
-- (waiter -> deadline in server milliseconds). A live waiter pushes its
-- deadline forward at every attempt; one that crashed stops doing so and is
-- evicted once its deadline has passed, wherever it stands in the queue.
-- Deadlines use the server's clock (TIME), never a client's, so clock skew
-- between processes cannot evict a live waiter.

local function now_ms()
	local t = redis.call('time')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- evict drops every waiter whose deadline has passed and returns the first
-- live waiter, or nil when nobody waits.
local function evict(queue, timeouts, now)
	local stale = redis.call('zrangebyscore', timeouts, '-inf', now)
	for _, w in ipairs(stale) do
		redis.call('lrem', queue, 0, w)
	end
	if #stale > 0 then
		redis.call('zremrangebyscore', timeouts, '-inf', now)
	end
	local head = redis.call('lindex', queue, 0)
	if head then
		return head
	end
	return nil
end

-- wake tells the waiter at the head, on its own channel, that the lock is
-- free: only it may take the lock, so nobody else is woken.
local function wake(pub, chprefix, head)
	if head then
		redis.call(pub, chprefix .. head, '1')
	end
end
