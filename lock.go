package relock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Lock is a reentrant, exclusive lock shared by every process that uses the
// same name on the same Redis, like Redisson's RLock. A Lock value is cheap
// and safe to share between goroutines; it holds no state of its own.
//
// Ownership travels in the context: the context a successful Lock returns
// carries the owner, so any call made with it, or with a context derived from
// it, is the same owner and re-enters (count + 1) instead of blocking. A
// context without an owner is a new owner. The returned context is also the
// holder's signal: it is cancelled when that hold is released (cause
// ErrUnlocked) or the lock is lost (cause ErrLockLost) — check
// context.Cause(ctx).
//
// In Redis a Lock is one hash, owner → hold count, whose TTL is the lease.
type Lock struct {
	exclusive // Name, Key and the queries
	keys      lockKeys
}

type lockKeys struct {
	hash, channel string
	// tail outlives the free lock for the unlock latch: the last token and
	// the latch of the last final releases (see release_common.lua).
	tail string
	// waitChannel is where releases hand the lock over to this Client's
	// waiters: <hash>:w:<client id> (see handover_common.lua).
	waitChannel string
	// The KEYS of the acquire and of the release (and abandon, force
	// release) scripts, boxed once: see keySet.
	acquireKeys, releaseKeys keySet
}

func lockKeysOf(ks keyspace) lockKeys {
	return lockKeysOn(ks.key(""), ks.key("last"), ks.key("ch"))
}

// lockKeysOn lays out a Lock's keys on the given hash, tail and channel.
func lockKeysOn(hashKey, tailKey, channelKey string) lockKeys {
	k := lockKeys{hash: hashKey, tail: tailKey, channel: channelKey}
	hash, tail, channel := any(k.hash), any(k.tail), any(k.channel)
	k.acquireKeys = keySet{[]string{k.hash, k.tail}, []any{hash, tail}}
	k.releaseKeys = keySet{[]string{k.hash, k.channel, k.tail}, []any{hash, channel, tail}}
	return k
}

// Lock returns the reentrant lock called name. It sends nothing to Redis. An
// empty or oversized name does not panic: every method of the returned Lock
// then fails with ErrInvalidArgument.
func (c *Client) Lock(name string) *Lock {
	l := &Lock{}
	if l.init(c, name) {
		l.keys = lockKeysOf(l.ks)
		l.keys.waitChannel = l.keys.hash + ":w:" + c.id
		l.hash = l.keys.hash
	}
	return l
}

// Lock blocks until the lock is acquired or ctx ends, and returns the context
// of the hold. The hold has the Client's watchdog lease (30 s by default),
// renewed while it is held. If ctx already holds the lock, Lock re-enters at
// once.
//
// On failure it returns an error wrapping ErrNotObtained and ctx.Err() when
// ctx ended first, ErrClientClosed when the Client closed, or a Redis error;
// the lock is then not held by ctx's owner (a re-entry that failed leaves the
// outer holds as they were).
func (l *Lock) Lock(ctx context.Context) (context.Context, error) {
	return l.TryLock(ctx, WaitForever, 0)
}

// TryLock tries to acquire the lock for at most wait (0: a single attempt;
// WaitForever: until ctx ends) and returns the context of the hold. With
// lease > 0 the hold expires by itself after lease and is never renewed (its
// context is cancelled with ErrLockLost when it does); with lease 0 the
// watchdog keeps it. A re-entry never shortens the lease the lock already
// has.
//
// When wait ends first, the error wraps ErrNotObtained. Negative or absurd
// durations return ErrInvalidArgument and send nothing.
func (l *Lock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return l.tryLock(ctx, soleOf(lockScheme{l}), wait, lease)
}

// Unlock releases one hold of ctx's owner; the lock is free once every hold
// is released. It works with a cancelled ctx, since it must not leak the lock:
// the Redis call is bounded by the go-redis client's timeouts instead.
//
// It returns ErrNotHeld (changing nothing) when ctx's owner holds no hold —
// ctx never locked, or one Unlock more than Locks — and ErrLockLost when the
// hold was lost before Unlock. The released hold's context is cancelled with
// cause ErrUnlocked.
func (l *Lock) Unlock(ctx context.Context) error { return l.unlock(ctx, soleOf(lockScheme{l})) }

// ForceUnlock frees the lock whoever holds it and wakes its waiters. It
// reports whether the lock was held. The hold it removed, if this Client
// has it, ends at once (context cancelled with ErrLockLost); a hold it hands
// over to a waiter, of this Client or another, is that waiter's and stays.
// Holders in other processes learn it at their next renewal, Unlock or lease
// end. It returns when ctx ends, with an error wrapping context.Cause(ctx)
// and ErrUnavailable, even if Redis has not answered; the force-release may
// still run then.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	return l.forceUnlock(ctx, l.keys.hash, lockForceReleaseCall(l.c, l.keys))
}

// Token returns the fencing token of ctx's hold: a number strictly greater
// than that of every earlier acquisition of this lock name, the same for all
// re-entries of one hold. Pass it to the storage the lock protects, and let
// the storage reject writes with a smaller token than it has seen: that keeps
// a holder that lost its lock (a pause longer than the lease) from doing harm.
// It reports ErrNotHeld when ctx's owner holds no hold of this Client.
//
// A token is max(the Redis server's clock in µs, the last token Redis still
// knows + 1): the last token lives in the held hash and, for the unlock
// latch after a release, in a tail key. So tokens keep increasing across
// lease expiry, force-unlock, a restart without persistence, a failover to a
// replica that missed writes and eviction, as long as no Redis host's clock
// steps back (or lags its master's) by more than the time since the
// acquisition Redis forgot. Tokens are large (about 1.8e15): compare them,
// do not count on their values.
func (l *Lock) Token(ctx context.Context) (int64, error) { return l.token(ctx, lockScheme{l}) }

// lockScheme runs Lock's scripts.
type lockScheme struct{ l *Lock }

func (s lockScheme) client() *Client { return s.l.c }
func (s lockScheme) holdID() string  { return s.l.keys.hash }
func (s lockScheme) info() LockInfo  { return LockInfo{Name: s.l.ks.name, Kind: KindLock} }

func (s lockScheme) acquire(ctx context.Context, r acquireReq) (attempt, error) {
	l := s.l
	var buf [4]int64 // the reply, on the stack
	res, repl, err := l.c.runAcquire(ctx, lockAcquireCall(l.c, l.keys, r.owner, r, r.waiter), buf[:0])
	if err != nil {
		return attempt{}, err
	}
	a, err := parseAcquire(res, l.keys.waitChannel)
	if a.outcome == acquired {
		a.replication = repl
	}
	return a, err
}

// parseAcquire reads the reply shared by the acquire scripts: {1, token,
// count}, {0, pttl, place} or {-1, 0}.
func parseAcquire(res []int64, channel string) (attempt, error) {
	if len(res) < 2 {
		return attempt{}, fmt.Errorf("relock: acquire script returned %d values, want 2 or 3", len(res))
	}
	switch res[0] {
	case 1:
		return attempt{outcome: acquired, token: res[1]}, nil
	case 0:
		a := attempt{outcome: busy, retryIn: leaseLeft(res[1]), channel: channel}
		if len(res) > 2 {
			a.place = queuePlace(res[2])
		}
		return a, nil
	case -1:
		return attempt{outcome: mismatch}, nil
	}
	return attempt{}, fmt.Errorf("relock: acquire script returned status %d", res[0])
}

func (s lockScheme) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	l := s.l
	n, err := l.c.eval(ctx, "release", lockReleaseCall(l.c, l.keys, r.owner, r)).Int64()
	if err != nil {
		return 0, err
	}
	return parseRelease(n)
}

// parseRelease reads the reply shared by the release scripts.
func parseRelease(n int64) (releaseOutcome, error) {
	switch n {
	case 1:
		return released, nil
	case 0:
		return stillHeld, nil
	case -1:
		return notHeld, nil
	}
	return 0, fmt.Errorf("relock: release script returned %s", strconv.FormatInt(n, 10))
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
func (s lockScheme) leave(ctx context.Context, owner, waiter string) {
	s.l.c.leaveQueue(ctx, lockAbandonCall(s.l.c, s.l.keys, owner, waiter))
}
