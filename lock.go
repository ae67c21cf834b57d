package relock

import (
	"context"
	"time"
)

// Lock is a reentrant, exclusive lock shared by every process that uses the
// same name on the same Redis, like Redisson's RLock. Owners, hold contexts
// and leases work as the package doc describes.
type Lock struct {
	exclusive // Name, Key and the queries
	keys      lockKeys
}

type lockKeys struct {
	// hash is the lock; free, it keeps the last token and the latch of the
	// last final releases for the unlock latch (see release_common.lua).
	hash, channel string
	// forced keeps the force releases' answers for a replay (see
	// force_common.lua): the one key besides the hash, written only by a
	// force release.
	forced string
	// waitChannel is where releases hand the lock over to this Client's
	// waiters: <hash>:w:<client id> (see handover_common.lua).
	waitChannel string
	// The KEYS of the acquire, of the release (and abandon) and of the
	// force release scripts, boxed once: see keySet.
	acquireKeys, releaseKeys, forceKeys keySet
}

func lockKeysOf(ks keyspace) lockKeys {
	return lockKeysOn(ks.key(""), ks.key("last"), ks.key("ch"))
}

// lockKeysOn lays out a Lock's keys on the given hash, force releases' key
// and channel.
func lockKeysOn(hashKey, forcedKey, channelKey string) lockKeys {
	k := lockKeys{hash: hashKey, forced: forcedKey, channel: channelKey}
	hash, forced, channel := any(k.hash), any(k.forced), any(k.channel)
	k.acquireKeys = keySet{[]string{k.hash}, []any{hash}}
	k.releaseKeys = keySet{[]string{k.hash, k.channel}, []any{hash, channel}}
	k.forceKeys = keySet{[]string{k.hash, k.channel, k.forced}, []any{hash, channel, forced}}
	return k
}

// Lock returns the reentrant lock called name, sending nothing to Redis; an
// invalid name makes its methods fail with ErrInvalidArgument.
func (c *Client) Lock(name string) *Lock {
	l := &Lock{}
	if l.init(c, name) {
		l.keys = lockKeysOf(l.ks)
		l.keys.waitChannel = l.keys.hash + ":w:" + c.id
		l.hash = l.keys.hash
	}
	return l
}

// Lock blocks until the lock is acquired or ctx ends, and returns the hold
// context, with the watchdog lease. If ctx already holds the lock, Lock
// re-enters at once. On failure it returns ctx and an error wrapping
// ErrNotObtained (with ctx's cause when ctx ended), ErrClientClosed or a
// Redis error; ctx's owner then holds no more than before.
func (l *Lock) Lock(ctx context.Context) (context.Context, error) {
	return l.tryLock(ctx, soleOf(lockScheme{l}), WaitForever, 0)
}

// TryLock is Lock waiting at most wait (0: one attempt; WaitForever: until
// ctx ends). With lease > 0 the hold is never renewed and expires after
// lease (its context is then cancelled with ErrLockLost); with lease 0 the
// watchdog keeps it. A re-entry never shortens the lock's lease. Negative or
// absurd durations return ErrInvalidArgument and send nothing.
func (l *Lock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return l.tryLock(ctx, soleOf(lockScheme{l}), wait, lease)
}

// Unlock releases one hold of ctx's owner and cancels its context with
// ErrUnlocked. It works with a cancelled ctx and returns within the unlock
// timeout (an unconfirmed release wraps ErrNotConfirmed). It returns
// ErrNotHeld, changing nothing, when ctx's owner holds no hold, and
// ErrLockLost when the hold was lost before.
func (l *Lock) Unlock(ctx context.Context) error { return l.unlock(ctx, soleOf(lockScheme{l})) }

// ForceUnlock frees the lock whoever holds it, hands it to the next waiter
// (whose hold stays), and reports whether it was held. This Client's hold it
// removed ends at once (ErrLockLost); holders elsewhere learn it at their
// next renewal, Unlock or lease end. When ctx ends first it returns an error
// wrapping ctx's cause and ErrUnavailable; the force-release may still run.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	return l.forceUnlock(ctx, l.keys.hash, lockForceReleaseCall(l.c, l.keys))
}

// Token returns the fencing token of ctx's hold, the same for its re-entries
// (ErrNotHeld when this Client has none): greater than every earlier
// acquisition's of this name, also across expiry, force-unlock, restarts,
// failovers and eviction, as long as no Redis host's clock steps back (or
// lags its master's) by more than the time since the acquisition Redis
// forgot. Compare tokens only.
func (l *Lock) Token(ctx context.Context) (int64, error) { return l.token(ctx, lockScheme{l}) }

// lockScheme runs Lock's scripts.
type lockScheme struct{ l *Lock }

func (s lockScheme) client() *Client { return s.l.c }
func (s lockScheme) holdID() string  { return s.l.keys.hash }
func (s lockScheme) info() LockInfo  { return LockInfo{Name: s.l.ks.name, Kind: KindLock} }

func (s lockScheme) acquire(ctx context.Context, r acquireReq) (attempt, error) {
	l := s.l
	return l.c.runAcquire(ctx, lockAcquireCall(l.c, l.keys, r.owner, r, r.waiter), l.keys.waitChannel, nil)
}

func (s lockScheme) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	l := s.l
	return l.c.runRelease(ctx, lockReleaseCall(l.c, l.keys, r.owner, r))
}

func (s lockScheme) renewal(_, gen string, lease time.Duration) renewal {
	return renewal{call: lockRenewCall(s.l.keys.hash, gen, lease)}
}

// traits: Lock's waiters queue in Redis and are handed the lock; the
// scheme is its own waitQueue.
func (s lockScheme) traits() traits { return traits{queue: s} }

// channel is where this Client's waiters are handed the lock.
func (s lockScheme) channel() string { return s.l.keys.waitChannel }

// leave takes a waiter that gave up out of the lock's queue (see
// Client.leaveQueue).
func (s lockScheme) leave(ctx context.Context, owner, waiter string, lease time.Duration) {
	s.l.c.leaveQueue(ctx, lockAbandonCall(s.l.c, s.l.keys, owner, waiter, lease))
}
