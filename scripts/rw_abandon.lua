-- rw_abandon: withdraw the claim of a writer that stops waiting.
--
-- KEYS[1]  lock hash
-- KEYS[2]  waiting writers
-- KEYS[3]  readers' channel
-- KEYS[4]  writers' channel
-- ARGV[1]  owner
-- ARGV[2]  publish command: "publish" or "spublish"
--
-- Returns 1 when the owner had a claim, 0 when it had none.
--
-- Readers that queued behind the claim are woken if no writer waits any
-- more, and a writer is woken if the lock is free: the wake-up of a release
-- may have gone to the writer that is leaving.
local was = redis.call('zrem', KEYS[2], ARGV[1])
if was == 1 then
	local free = redis.call('exists', KEYS[1]) == 0
	local writersWait = waiting(KEYS[2], now_ms())
	if free or not writersWait then
		announce(ARGV[2], KEYS[3], KEYS[4], free, writersWait)
	end
end
return was
