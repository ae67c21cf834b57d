-- include: handover_common release_rare
-- multi_release: release one hold on each of several reentrant exclusive
-- locks of one Client (and, on a Cluster, one slot), each independently: a
-- part that is not held does not keep the others from being released.
--
-- KEYS[2i-1]  lock hash of part i (its token and latch too, see
--             release_common)
-- KEYS[2i]    unlock channel of part i
-- ARGV[1]     owner
-- ARGV[2]     op id of this request
-- ARGV[3]     publish command: "publish" or "spublish"
-- ARGV[4]     latch lifetime in milliseconds
-- ARGV[5]     as lock_release's ARGV[7]
-- ARGV[4+2i]  generation the caller holds on part i
-- ARGV[5+2i]  "1" when it is the caller's last hold on part i
--
-- A part's final release hands it over to its first queued waiter, as
-- lock_release does.
--
-- Returns one integer per part, as lock_release: 1 the part is free now, 0
-- one hold released and the owner keeps the rest, -1 the generation did not
-- hold it (nothing changed for that part). Idempotent under replay, per
-- part, exactly as lock_release.
local owner, op = ARGV[1], ARGV[2]
local out = {}
for i = 1, #KEYS / 2 do
	local hash, channel = KEYS[2 * i - 1], KEYS[2 * i]
	local done, cur = release_hold(hash, owner, op, ARGV[4 + 2 * i], ARGV[5 + 2 * i], hash)
	if done then
		out[i] = done
	elseif not cur then
		out[i] = release_replay(hash, hash, op)
	else
		free_hold(hash, channel, op, hash, cur, ARGV[3], ARGV[4], ARGV[5], qf_reader(hash, cur[4], owner), owner)
		out[i] = 1
	end
end
return out
