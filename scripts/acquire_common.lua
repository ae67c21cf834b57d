-- acquire_common: helpers prepended to the acquire scripts (see scripts.go).

-- fence_token returns the lock name's current fencing counter, which is the
-- token of the hold its owner has (nobody else could take it meanwhile), or
-- 0 when fencing is off.
local function fence_token(fence_key, fencing)
	if fencing == '1' then
		return tonumber(redis.call('get', fence_key) or 0)
	end
	return 0
end

-- settled applies the replay contract shared by every acquire script: the
-- caller sends the hold count it believes its owner has. One more than that
-- can only be this very request, already applied (go-redis resent it after
-- losing the reply): success. Any other difference means the hold was lost,
-- or is held under this owner elsewhere: {-1, count}. nil: go on.
local function settled(count, believed, fence_key, fencing)
	if count == believed + 1 then
		return {1, fence_token(fence_key, fencing)}
	end
	if count ~= believed then
		return {-1, count}
	end
	return nil
end
