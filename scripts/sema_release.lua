-- include: acquire_rare sema_common
-- sema_release: give back the permits of one hold of a Semaphore, and hand
-- them on, in the same call, to the waiters at the head of the queue they
-- serve (see sema_serve): only those wake.
--
-- KEYS[1]  semaphore hash (see sema_common)
-- KEYS[2]  the latch of the releases, "<prefix>:{name}:sema:r:last" (see
--          below)
-- KEYS[3]  its holds by deadline (":sema:d")
-- KEYS[4]  its queue (":sema:q")
-- KEYS[5]  its claims by deadline (":sema:c")
-- ARGV[1]  generation of the hold
-- ARGV[2]  op id of this request
-- ARGV[3]  publish command
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  "1" to trust every PUBLISH (see sema_serve)
--
-- Returns 1 released (also for a replay the latch records), -1 the hold
-- was gone (lost; nothing changed but the reclaim of ended holds).
--
-- The latch is bounded by time, not by a count of releases (a busy
-- semaphore fills any count in milliseconds): every release of the last
-- latch lifetime is remembered, whatever their number. A release is
-- remembered by a fingerprint of its op id (the first 8 bytes of its
-- SHA-1: two op ids share one with a chance of 2^-64, and only a release
-- of a hold already gone could then read as a replay), in the slot of the
-- latch lifetime it ran in: SEMA_SLOTS slots per lifetime, each a field of
-- the latch hash named by its number modulo SEMA_NAMES, whose value is the
-- fingerprints one after the other. A release appends to its slot's value
-- (a few KB at 1,000 releases/s), and the first release of a slot deletes
-- the slots the latch no longer covers: the hash holds the releases of one
-- latch lifetime and a slot, at about 9 bytes each when slots are full and
-- 15 at 100 releases/s (a field per release would cost about 170). A replay reads the slots of the last lifetime and
-- finds its fingerprint at a multiple of 8 bytes; a release is remembered
-- for the latch lifetime, and at most a slot longer while releases go on.
-- The hash's PTTL is the lifetime after its last write.
local SEMA_SLOTS = 32
local SEMA_NAMES = 100

-- sema_slot returns, for a latch lifetime of ms, the slot of now and the
-- oldest slot a release younger than ms can be in.
local function sema_slot(now, ms)
	ms = tonumber(ms)
	local w = math.max(1, math.ceil(ms / SEMA_SLOTS))
	return math.floor(now / w), math.floor((now - ms) / w)
end

-- sema_slot_name is the field of slot s: no two slots the hash may hold at
-- once (fewer than 2 * SEMA_SLOTS + 4 apart) share one.
local function sema_slot_name(s)
	return tostring(s % SEMA_NAMES)
end

-- sema_fingerprint is the 8 bytes that stand for op in the latch.
local function sema_fingerprint(op)
	local h = redis.sha1hex(op)
	local b = {}
	for i = 1, 16, 2 do
		b[#b + 1] = tonumber(string.sub(h, i, i + 1), 16)
	end
	return string.char(unpack(b))
end

-- sema_latch_has reports whether the latch remembers release op, at now,
-- for a lifetime of ms.
local function sema_latch_has(latch, op, now, ms)
	local s, oldest = sema_slot(now, ms)
	local names = {}
	for x = oldest, s do
		names[#names + 1] = sema_slot_name(x)
	end
	local fp = sema_fingerprint(op)
	for _, v in ipairs(redis.call('hmget', latch, unpack(names))) do
		local at = v and string.find(v, fp, 1, true)
		while at do
			if at % 8 == 1 then
				return true
			end
			at = string.find(v, fp, at + 1, true)
		end
	end
	return false
end

-- sema_latch_add records release op at now, for a lifetime of ms; the
-- first release of a slot forgets the slots older than the lifetime.
local function sema_latch_add(latch, op, now, ms)
	local s, oldest = sema_slot(now, ms)
	local name = sema_slot_name(s)
	local v = redis.call('hget', latch, name)
	if not v then
		local gone = {}
		for x = s - SEMA_NAMES + 1, oldest - 1 do
			gone[#gone + 1] = sema_slot_name(x)
		end
		if #gone > 0 then
			redis.call('hdel', latch, unpack(gone))
		end
		v = ''
	end
	redis.call('hset', latch, name, v .. sema_fingerprint(op))
	redis.call('pexpire', latch, ms)
end

local k = {h = KEYS[1], d = KEYS[3], q = KEYS[4], c = KEYS[5]}
local st = sema_open(k, math.floor(now_us() / 1000))
if not st.cap or not sema_drop(st, ARGV[1]) then
	if sema_latch_has(KEYS[2], ARGV[2], st.now, ARGV[4]) then
		return 1
	end
	return -1
end
sema_serve(st, ARGV[3], ARGV[5], nil)
sema_wake_head(st, ARGV[3], nil)
sema_store(st)
sema_latch_add(KEYS[2], ARGV[2], st.now, ARGV[4])
return 1
