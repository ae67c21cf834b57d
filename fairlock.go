package relock

import (
	"context"
	"time"
)

// FairLock is a reentrant, exclusive lock granted in request order across
// every process, like Redisson's fair lock: whoever asked first gets it
// first. Ownership, re-entry, hold contexts, leases and the watchdog work
// exactly as for Lock.
//
// The order is kept in Redis, in a queue of waiting owners and a sorted set
// of their deadlines, next to the lock's hash and in the same Cluster slot.
// A waiter renews its deadline at every attempt, at least every third of the
// Client's waiter timeout (WithWaiterTimeout, 10 s by default). One that
// stops waiting — its context ended, TryLock's wait ran out, the Client
// closed — leaves the queue at once; one whose process died is evicted when
// its deadline passes, so it holds up the waiters behind it for at most the
// waiter timeout. A waiter that stalls longer than that (a paused process)
// is evicted too and queues again at the back on its next attempt.
//
// Unlock wakes only the next waiter, on a channel of its own; the others
// sleep on. A new owner never takes the lock while others queue, even when
// it finds it free. Re-entry by the holder never queues.
//
// Keys: "<prefix>:{name}:fair" (owner → hold count), ":fair:queue" and
// ":fair:timeouts" exist only while someone waits (they also expire by
// themselves if every waiter dies). Once the lock is free and nobody waits,
// only ":fair:tail" (the last token) and the markers of final Unlocks
// remain, for the unlock latch (see WithUnlockLatch); then nothing.
// A FairLock and a Lock of the same name are different locks.
//
// Every call costs what Lock's does — one round trip for an uncontended Lock
// or Unlock — plus one for a TryLock that gives up (leaving the queue).
type FairLock struct {
	exclusive // Name, Key and the queries
	keys      fairKeys
}

type fairKeys struct {
	hash, queue, timeouts, tail, latchPrefix, chPrefix string
}

func fairKeysOf(ks keyspace) fairKeys {
	return fairKeys{hash: ks.key("fair"), queue: ks.key("fair:queue"), timeouts: ks.key("fair:timeouts"),
		tail: ks.key("fair:tail"), latchPrefix: ks.key("fair:latch:"), chPrefix: ks.key("fair:ch:")}
}

// FairLock returns the fair lock called name. It sends nothing to Redis. An
// empty or oversized name does not panic: every method of the returned
// FairLock then fails with ErrInvalidArgument.
func (c *Client) FairLock(name string) *FairLock {
	l := &FairLock{}
	if l.init(c, name) {
		l.keys = fairKeysOf(l.ks)
		l.hash = l.keys.hash
	}
	return l
}

// QueueKey returns the Redis key of the list of waiting owners.
func (l *FairLock) QueueKey() string { return l.keys.queue }

// Lock blocks until it is ctx's owner's turn and the lock is acquired, or ctx
// ends, and returns the context of the hold, renewed by the watchdog. If ctx
// already holds the lock, Lock re-enters at once.
//
// On failure it returns an error wrapping ErrNotObtained and ctx.Err() when
// ctx ended first, ErrClientClosed when the Client closed, or a Redis error;
// the owner has then left the queue (or will be evicted from it, if Redis
// could not be reached) and does not hold the lock.
func (l *FairLock) Lock(ctx context.Context) (context.Context, error) {
	return l.TryLock(ctx, WaitForever, 0)
}

// TryLock queues for the lock for at most wait (0: a single attempt, which
// succeeds only if the lock is free and nobody queues; WaitForever: until ctx
// ends) and returns the context of the hold. lease works as for
// Lock.TryLock. When wait ends first the owner leaves the queue and the error
// wraps ErrNotObtained. Negative or absurd durations return
// ErrInvalidArgument and send nothing.
func (l *FairLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return l.tryLock(ctx, fairScheme{l}, wait, lease)
}

// Unlock releases one hold of ctx's owner; the final one frees the lock and
// wakes the next waiter in the queue, and nobody else. Errors and
// cancellation are as for Lock.Unlock: it works with a cancelled ctx, returns
// ErrNotHeld (changing nothing) when ctx's owner holds nothing and
// ErrLockLost when the hold was lost.
func (l *FairLock) Unlock(ctx context.Context) error { return l.unlock(ctx, fairScheme{l}) }

// ForceUnlock frees the lock whoever holds it and wakes the next waiter; the
// queue keeps its order. It reports whether the lock was held. This Client's
// holds end at once (ErrLockLost); other processes learn it at their next
// renewal, Unlock or lease end.
func (l *FairLock) ForceUnlock(ctx context.Context) (bool, error) {
	return l.forceUnlock(ctx, l.keys.hash, fairForceReleaseCall(l.c, l.keys))
}

// Token returns the fencing token of ctx's hold, as Lock.Token does; the
// counter is this FairLock's own. It reports ErrNotHeld when ctx's owner
// holds no hold of this Client.
func (l *FairLock) Token(ctx context.Context) (int64, error) { return l.token(ctx, fairScheme{l}) }

// fairScheme runs FairLock's scripts.
type fairScheme struct{ l *FairLock }

func (s fairScheme) client() *Client { return s.l.c }
func (s fairScheme) holdID() string  { return s.l.keys.hash }

func (s fairScheme) info() LockInfo { return LockInfo{Name: s.l.ks.name, Kind: KindFairLock} }

func (s fairScheme) acquire(ctx context.Context, r acquireReq) (attempt, error) {
	l := s.l
	res, repl, err := l.c.runAcquire(ctx, fairAcquireCall(l.c, l.keys, r))
	if err != nil {
		return attempt{}, wrapRedis("acquire", err)
	}
	a, err := parseAcquire(res, l.keys.chPrefix+r.owner)
	if a.outcome == acquired {
		a.replication = repl
	}
	if a.outcome == busy {
		// The next attempt renews this waiter's deadline: it must come well
		// before the deadline, whatever the holder's lease.
		a.retryIn = l.c.refreshWithin(a.retryIn)
	}
	return a, err
}

func (s fairScheme) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	l := s.l
	n, err := fairReleaseCall(l.c, l.keys, r).run(ctx, l.c.rdb).Int64()
	if err != nil {
		return 0, wrapRedis("release", err)
	}
	return parseRelease(n)
}

// The hold's hash has Lock's fields, so Lock's renewal script fits, and
// fair holds share its batches.
func (s fairScheme) renewal(_, gen string, lease time.Duration) renewal {
	return renewal{call: lockRenewCall(s.l.keys.hash, gen, lease)}
}

func (s fairScheme) abandon(ctx context.Context, owner, _ string) {
	l := s.l
	err := fairAbandonCall(l.c, l.keys, owner).run(ctx, l.c.rdb).Err()
	if err != nil {
		// Not fatal: the waiter's deadline evicts it.
		l.c.log.Warn("relock: could not leave a fair lock's queue; it will be evicted at its deadline",
			"lock", l.ks.name, "err", err)
	}
}
