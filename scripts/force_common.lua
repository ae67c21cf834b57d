-- force_common: replay safety of the force releases, prepended to each
-- *_force_release script; not run on its own.
--
-- A force release removes holds whoever has them and replies with their
-- generations. Resent by go-redis after its reply was lost, it would find
-- nothing left and answer "nothing held" although it removed them: so the
-- first run records the generations it removed in the tail (the key the
-- lock keeps for the unlock latch's time after its last write), in field
-- '~f' .. op, and a run with the same op id answers with them. The field
-- starts with '~', which the release latch's scan (release_replay) skips.

-- force_replayed returns the generations the force release op removed, or
-- nil when op has not run.
local function force_replayed(tail, op)
	local v = redis.call('hget', tail, '~f' .. op)
	if not v then
		return nil
	end
	local gens = {}
	for g in string.gmatch(v, '([^|]*)|') do
		gens[#gens + 1] = g
	end
	return gens
end

-- force_record records gens (none: nothing to answer differently) as what
-- op removed, for ms milliseconds at least.
local function force_record(tail, op, gens, ms)
	if #gens == 0 then
		return
	end
	redis.call('hset', tail, '~f' .. op, table.concat(gens, '|') .. '|')
	if redis.call('pttl', tail) < tonumber(ms) then
		redis.call('pexpire', tail, ms)
	end
end
