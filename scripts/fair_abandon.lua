-- include: handover_common queue_common fair_common
-- fair_abandon: a waiter gives up. It leaves the queue; if a hand-over made
-- it the holder meanwhile (the grant crossed its decision to leave), the
-- hold is released as by fair_release, handing the lock on. A lock found
-- free with others queued (its last holder's lease ran out) is handed to
-- the first of them that listens.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue (see fair_common)
-- KEYS[3]  the lock's channel (see fair_release)
-- ARGV[1]  owner; "" for whoever holds generation ARGV[2] (a grant that
--          reached a Client whose waiter no longer waits, see pubsub.go)
-- ARGV[2]  the waiter id (the op id its attempts sent)
-- ARGV[3]  publish command
-- ARGV[4]  the unlock latch in milliseconds (see fair_release)
-- ARGV[5]  as lock_release's ARGV[7]
-- ARGV[6]  the waiter's lease in milliseconds and ARGV[7] its fencing flag,
--          as its attempts sent them: with ARGV[1], its entry in the queue
--
-- Returns 1 when it released a hold handed to the waiter, 0 otherwise.
-- Idempotent: once the waiter is neither queued nor holding, it changes
-- nothing but a hand-over that was due.
local hash, w = KEYS[1], ARGV[2]
local cur = redis.call('hmget', hash, '~g', '~o', '~t', '~q', '~m', '~l', '~v')
layout_check(cur[7], hash)
cur[7] = nil
if cur[1] == w and (ARGV[1] == '' or redis.call('hexists', hash, ARGV[1]) == 1) then
	local holder = ARGV[1]
	if holder == '' then
		holder = nil -- found by the reader
	end
	free_hold(hash, KEYS[3], nil, hash, cur, ARGV[3], ARGV[4], ARGV[5], fz_reader(hash, KEYS[2], cur[4], holder), holder)
	return 1
end
if ARGV[1] ~= '' then
	redis.call('zrem', KEYS[2], q_entry(w, ARGV[6], ARGV[7], ARGV[1]))
end
if not cur[1] then
	hand_over(hash, hash, fz_reader(hash, KEYS[2], nil, false), nil, nil, nil, ARGV[3], ARGV[5])
end
return 0
