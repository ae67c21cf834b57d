package relock

import (
	"context"
	"time"
)

// Lock is a reentrant, exclusive lock, like Redisson's RLock.
type Lock struct {
	exclusive // Name, Key and the queries
	keys      lockKeys
}

type lockKeys struct {
	// hash is the lock; free, it keeps the last token and the latch of the
	// last final releases for the unlock latch (see release_common.lua).
	hash, channel string
	// waitChannel is where releases hand the lock over to this Client's
	// waiters: <hash>:w:<client id> (see handover_common.lua).
	waitChannel string
	// The KEYS of the acquire and of the release (and abandon) scripts,
	// boxed once: see keySet. A force release, rare, builds its own
	// (forcedKeys).
	acquireKeys, releaseKeys keySet
}

func lockKeysOf(ks keyspace) lockKeys {
	return lockKeysOn(ks.key(""), ks.key("ch"))
}

// lockKeysOn lays out a Lock's keys on the given hash and channel.
func lockKeysOn(hashKey, channelKey string) lockKeys {
	k := lockKeys{hash: hashKey, channel: channelKey}
	hash := any(k.hash)
	k.acquireKeys = keySet{[]string{k.hash}, hash}
	k.releaseKeys = keySet{[]string{k.hash, k.channel}, hash}
	return k
}

// forcedKeys are the KEYS of a force release: the hash, the channel and
// the key that keeps the force releases' answers for a replay (see
// force_common.lua), <hash>:last, the one key besides the hash, written
// only by a force release. It is built per call, not kept per lock: every
// held Lock would carry it for a call operators make.
func (k lockKeys) forcedKeys() keySet {
	return keySet{[]string{k.hash, k.channel, k.hash + ":last"}, k.acquireKeys.first}
}

// Lock returns the lock called name, sending nothing to Redis.
func (c *Client) Lock(name string) *Lock {
	l := &Lock{}
	if l.init(c, name) {
		l.keys = lockKeysOf(l.ks)
		l.keys.waitChannel = handOverChannel(l.keys.hash, c.id)
		l.hash = &l.keys.hash
	}
	return l
}

// Lock acquires or re-enters the lock and returns the hold context.
func (l *Lock) Lock(ctx context.Context) (context.Context, error) {
	if l.err != nil { // base.tryLock's check, written here: one frame fewer to Redis
		return ctx, l.err
	}
	return lockWith(ctx, soleOf(lockScheme{l}), WaitForever, 0)
}

// TryLock is Lock waiting at most wait (0: once); lease > 0: not renewed.
func (l *Lock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return l.tryLock(ctx, soleOf(lockScheme{l}), wait, lease)
}

// Unlock releases one hold of ctx's owner (ErrLockLost: it was lost).
func (l *Lock) Unlock(ctx context.Context) error { return l.unlock(ctx, soleOf(lockScheme{l})) }

// ForceUnlock frees the lock, whoever holds it, for the next waiter; the
// holder's context ends with ErrForceUnlocked (when: docs/kinds.md).
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	return l.forceUnlock(ctx, ForceGuard{}, l.keys.hash, lockForceReleaseCall(l.c, l.keys, ForceGuard{}))
}

// Token returns the fencing token of ctx's hold, above every earlier one of
// the name unless a Redis clock steps back (or lags its master's) by more
// than the time since a grant Redis forgot; ErrNotHeld past the lease.
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
	l := s.l
	l.c.leaveQueue(ctx, abandonCall(l.c, lockAbandonScript, l.keys.releaseKeys, owner, waiter, lease))
}
