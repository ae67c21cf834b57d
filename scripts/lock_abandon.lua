-- include: handover_common queue_common
-- lock_abandon: a waiter gives up. It leaves the queue; if a hand-over made
-- it the holder meanwhile (the grant crossed its decision to leave), the
-- hold is released as by lock_release, handing the lock on.
--
-- KEYS[1]  lock hash (see lock_acquire)
-- KEYS[2]  the lock's channel (see lock_release)
-- ARGV[1]  owner; "" for whoever holds generation ARGV[2] (a grant that
--          reached a Client whose waiter no longer waits, see pubsub.go)
-- ARGV[2]  the waiter id (the op id its attempts sent)
-- ARGV[3]  publish command
-- ARGV[4]  latch lifetime in milliseconds (see lock_release)
-- ARGV[5]  as lock_release's ARGV[7]
--
-- Returns 1 when it released a hold handed to the waiter, 0 otherwise.
-- Idempotent: once the waiter is neither queued nor holding, it changes
-- nothing.
local hash, w = KEYS[1], ARGV[2]
local cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l', '~@' .. w, '~v')
layout_check(cur[8], hash)
cur[8] = nil
if cur[1] == w and (ARGV[1] == '' or redis.call('hexists', hash, ARGV[1]) == 1) then
	local holder = ARGV[1]
	if holder == '' then
		holder = nil -- found by the reader
	end
	free_hold(hash, KEYS[2], nil, hash, cur, ARGV[3], ARGV[4], ARGV[5], qf_reader(hash, cur[4], holder), holder)
	return 1
end
dequeue(hash, cur[4], cur[7], w)
return 0
