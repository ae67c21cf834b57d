-- layout_common: the layout version of a name's records, prepended to
-- every script that reads a kind's main hash; not run on its own.
--
-- The main hash of every kind (a Lock's, SpinLock's, FairLock's, RWLock's,
-- Semaphore's, CountDownLatch's) may carry ~v, the layout version of the
-- records of its name. This relock reads and writes layout 1, a main hash
-- without ~v, so that the version costs a record no byte. A relock that
-- lays its records out otherwise writes ~v (2, 3, ...) in every main hash
-- it makes. Every script that reads a main hash reads ~v in the same
-- command, before it writes anything, and refuses a layout it does not
-- know with an error reply that starts with RELOCK_LAYOUT (the Client
-- returns ErrIncompatibleLayout): it never reads a record it cannot read.
local LAYOUT = '1'

-- layout_known reports whether v, the ~v of a main hash (false or nil:
-- none), is a layout this relock reads.
local function layout_known(v)
	return not v or v == LAYOUT
end

-- layout_check refuses the script when v, the ~v of main hash key, is a
-- layout this relock does not know.
local function layout_check(v, key)
	if not layout_known(v) then
		error('RELOCK_LAYOUT ' .. key .. ' has records of layout ' .. v .. '; this relock reads layout ' .. LAYOUT)
	end
end
