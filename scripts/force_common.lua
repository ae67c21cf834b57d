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

-- force_tell tells the Client that made each generation of gens that a
-- force release removed it: on that Client's own channel (prefix followed
-- by its id, the part of the generation before its first ':'), which it
-- keeps subscribed while it holds locks, the message "forced <generation>
-- <id>", id naming the lock's holds as the Client records them (its hash;
-- an RWLock's side, "<hash>#r" or "#w"; a Semaphore's "<hash>#", which
-- starts each of its holds' ids): one generation may name holds of several
-- locks (a MultiLock's). Nothing is published when prefix is '' (a
-- Cluster: no Client keeps such a channel there). The Client that runs the
-- force release (the one of its op id, op) is not told: it ends its holds
-- on the reply (see base.forceRelease), and a message ending them sooner
-- would cancel a ForceUnlock called with the very hold's context.
local function force_tell(prefix, gens, hold, op)
	if prefix == '' then
		return
	end
	local self = string.match(op, '^([^:]+):')
	for _, g in ipairs(gens) do
		local id = string.match(g, '^([^:]+):')
		if id and id ~= self then
			-- pcall: a user whose ACL forbids PUBLISH (a SpinLock's, which needs
			-- no pub/sub) still force-releases; its holders learn it later.
			redis.pcall('publish', prefix .. id, 'forced ' .. g .. ' ' .. hold)
		end
	end
end

-- force_owners returns the owner fields of hash: its fields that do not
-- start with '~'.
local function force_owners(hash)
	local owners = {}
	local all = redis.call('hgetall', hash) -- HGETALL, not HKEYS: the ACL grants it
	for i = 1, #all, 2 do
		if string.sub(all[i], 1, 1) ~= '~' then
			owners[#owners + 1] = all[i]
		end
	end
	return owners
end

-- force_refused is the reply of a guarded force release that found the
-- lock held by someone else than it expects: '!', the fencing token of the
-- hold ('' when it has none), then the owners holding it now. Generations
-- never start with '!', so the caller tells the two replies apart.
local function force_refused(token, owners)
	local r = {'!', token or ''}
	for _, o in ipairs(owners) do
		r[#r + 1] = o
	end
	return r
end

-- force_expects reports whether the hold of an exclusive lock (hash, whose
-- fencing token is token) is the one a guarded force release expects: held
-- by want_owner ('' : any) at want_token ('' : any).
local function force_expects(hash, token, want_owner, want_token)
	if want_owner ~= '' and redis.call('hexists', hash, want_owner) == 0 then
		return false
	end
	return want_token == '' or want_token == token
end
