-- include: acquire_rare
-- multi_acquire: take or re-enter several reentrant exclusive locks of one
-- Client (and, on a Cluster, one slot) at once: all of them or none.
--
-- KEYS[i]     lock hash of part i (see lock_acquire)
-- ARGV[1]     owner ("<client id>:<owner id>")
-- ARGV[2]     op id of this request
-- ARGV[3]     lease in milliseconds
-- ARGV[4]     "1" to hand out fencing tokens on new acquisitions, "0" not to
-- ARGV[4+i]   generation the caller holds on part i ("" : new acquisition)
--
-- Returns {1, token_1, ..., token_n}  every part acquired
--         {0, i, pttl}                 part i is held by another owner;
--                                      nothing was changed
--         {-1, i, 0}                   the caller's generation on part i no
--                                      longer holds (lost); nothing changed
--
-- Idempotent under replay, as lock_acquire: the script is atomic, so either
-- every part records this op id as its last (this very request already ran)
-- or none does.
local n = #KEYS
local owner, op = ARGV[1], ARGV[2]
local cur = {}
for i = 1, n do
	cur[i] = redis.call('hmget', KEYS[i], owner, '~g', '~o', '~t', '~v', '~x', '~f')
	layout_check(cur[i][5], KEYS[i])
end
if last_op(cur[1][3], cur[1][2]) == op then
	local out = {1}
	for i = 1, n do
		out[i + 1] = tonumber(cur[i][4] or 0)
	end
	return out
end
-- include here: void_common
local voided = 0
for i = 1, n do
	if cur[i][6] and void_claimed(KEYS[i], cur[i][6], op) then
		voided = i
	end
	if cur[i][7] == op then
		voided = i
	end
end
if voided > 0 then
	-- A request its Client has settled already, every part marked by the
	-- settlement's releases (void_common), or a copy of the request that
	-- started holds the parts' last releases freed (see lock_acquire):
	-- nobody waits for this reply.
	return {0, voided, redis.call('pttl', KEYS[voided])}
end
for i = 1, n do
	local gen = ARGV[4 + i]
	if gen ~= '' and cur[i][2] ~= gen then
		return {-1, i, 0}
	end
	if gen == '' and not cur[i][1] and cur[i][2] then
		-- Mark the part: its release must tell the lock's channel, where
		-- a MultiLock waits (it is no queued waiter, see queue_common).
		redis.call('hset', KEYS[i], '~m', '1')
		return {0, i, redis.call('pttl', KEYS[i])}
	end
end
local out = {1}
for i = 1, n do
	local hash = KEYS[i]
	if ARGV[4 + i] == '' then
		out[i + 1] = grant_new(hash, owner, op, ARGV[3], ARGV[4], cur[i][4])
	else
		out[i + 1] = reenter_hold(hash, owner, op, ARGV[4 + i], ARGV[3])[2]
	end
end
return out
