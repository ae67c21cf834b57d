-- release_common: helpers prepended to the release scripts (see scripts.go).

-- replayed_release answers a release whose owner's count is not the one the
-- caller believes it has. One less means this very request already released
-- a hold (go-redis resent it after losing the reply): 0. A free lock whose
-- latch exists means this request already freed it: 1. Anything else means
-- the hold was lost, and nothing is changed: -1.
local function replayed_release(count, believed, latch)
	if count > 0 and count == believed - 1 then
		return 0
	end
	if count == 0 and believed == 1 and redis.call('exists', latch) == 1 then
		return 1
	end
	return -1
end
