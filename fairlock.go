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
// The order is kept in Redis, in a queue of waiters next to the lock's hash
// and in the same Cluster slot. Unlock hands the lock over inside the
// release script to the first waiter in the queue whose Client still
// listens, and tells that waiter alone, on its Client's channel: it holds
// the lock without another round trip, and nobody else wakes. A waiter that
// stops waiting — its context ended, TryLock's wait ran out, the Client
// closed — leaves the queue at once (and passes on a grant that crossed its
// leaving). One whose process died is skipped by the next hand-over, since
// its Client no longer listens, wherever it stands; one whose process is
// paused, or whose host vanished without closing its connections, still
// looks alive to Redis and is handed the lock, which it then holds for its
// lease, as a paused holder would. A waiter whose Client loses its
// subscription connection is skipped too, and queues again at the back once
// the connection is back.
//
// A new owner never takes the lock while others queue, even when it finds
// it free (its last holder's lease ran out): the lock goes to the first in
// line that listens. Re-entry by the holder never queues. The queue lives
// for the Client's waiter timeout (WithWaiterTimeout, 10 s by default),
// renewed by every queued waiter's attempts, which come at least every third
// of it, so it vanishes by itself once every waiter has died.
//
// Keys: "<prefix>:{name}:fair" (owner → hold count, as Lock's hash) and
// ":fair:q" (the queue) exist only while the lock is held or someone waits.
// Once the lock is free and nobody waits, only ":fair:last" (the tail: the
// last token and the latch of the last final Unlocks) remains, for the
// unlock latch (see WithUnlockLatch); then nothing. A FairLock and a Lock of the same name are
// different locks.
//
// Every call costs what Lock's does — one round trip for an uncontended Lock
// or Unlock, none for a waiter handed the lock — plus one for a waiter that
// gives up (leaving the queue).
type FairLock struct {
	exclusive // Name, Key and the queries
	keys      fairKeys
}

type fairKeys struct {
	hash, queue, channel string
	tail                 string // the last token and the latch (see release_common.lua)
	// waitChannel is where releases hand the lock over to this Client's
	// waiters: <hash>:w:<client id> (see queue_common.lua).
	waitChannel string
	// The KEYS of the acquire and of the release (and abandon, force
	// release) scripts, boxed once: see keySet.
	acquireKeys, releaseKeys keySet
}

func fairKeysOf(ks keyspace) fairKeys {
	k := fairKeys{hash: ks.key("fair"), queue: ks.key("fair:q"), tail: ks.key("fair:last"),
		channel: ks.key("fair:ch")}
	hash, queue, tail, channel := any(k.hash), any(k.queue), any(k.tail), any(k.channel)
	k.acquireKeys = keySet{[]string{k.hash, k.queue, k.tail}, []any{hash, queue, tail}}
	k.releaseKeys = keySet{[]string{k.hash, k.queue, k.channel, k.tail}, []any{hash, queue, channel, tail}}
	return k
}

// FairLock returns the fair lock called name. It sends nothing to Redis. An
// empty or oversized name does not panic: every method of the returned
// FairLock then fails with ErrInvalidArgument.
func (c *Client) FairLock(name string) *FairLock {
	l := &FairLock{}
	if l.init(c, name) {
		l.keys = fairKeysOf(l.ks)
		l.keys.waitChannel = l.keys.hash + ":w:" + c.id
		l.hash = l.keys.hash
	}
	return l
}

// QueueKey returns the Redis key of the queue of waiters: a string of
// entries, each four NUL-terminated fields (waiter id, lease in ms, fencing
// flag, owner), first in line first; Client.Inspect reads it.
func (l *FairLock) QueueKey() string { return l.keys.queue }

// Lock blocks until it is ctx's owner's turn and the lock is acquired, or ctx
// ends, and returns the context of the hold, renewed by the watchdog. If ctx
// already holds the lock, Lock re-enters at once.
//
// On failure it returns an error wrapping ErrNotObtained and ctx.Err() when
// ctx ended first, ErrClientClosed when the Client closed, or a Redis error;
// the owner has then left the queue (if Redis could not be reached, the
// leaving is retried in the background, and a hand-over skips a waiter
// whose Client no longer listens) and does not hold the lock.
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
	return l.tryLock(ctx, soleOf(fairScheme{l}), wait, lease)
}

// Unlock releases one hold of ctx's owner; the final one hands the lock over
// to the next waiter in the queue that still listens (or frees it), and
// wakes nobody else. Errors and
// cancellation are as for Lock.Unlock: it works with a cancelled ctx, returns
// ErrNotHeld (changing nothing) when ctx's owner holds nothing and
// ErrLockLost when the hold was lost.
func (l *FairLock) Unlock(ctx context.Context) error { return l.unlock(ctx, soleOf(fairScheme{l})) }

// ForceUnlock frees the lock whoever holds it, handing it over to the next
// waiter that listens; the queue keeps its order. It reports whether the lock was held. The hold
// it removed, if this Client has it, ends at once (ErrLockLost), not the
// one it hands over; other processes learn it at their next renewal, Unlock
// or lease end.
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
	var buf [4]int64 // the reply, on the stack
	res, repl, err := l.c.runAcquire(ctx, fairAcquireCall(l.c, l.keys, r), buf[:0])
	if err != nil {
		return attempt{}, err
	}
	a, err := parseAcquire(res, l.keys.waitChannel)
	if a.outcome == acquired {
		a.replication = repl
	}
	if a.outcome == busy && r.waiter {
		// The next attempt renews the queue's lifetime: it must come well
		// before the waiter timeout, whatever the holder's lease.
		a.retryIn = l.c.refreshWithin(a.retryIn)
	}
	return a, err
}

func (s fairScheme) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	l := s.l
	n, err := l.c.eval(ctx, "release", fairReleaseCall(l.c, l.keys, r)).Int64()
	if err != nil {
		return 0, err
	}
	return parseRelease(n)
}

// The hold's hash has Lock's fields, so Lock's renewal script fits, and
// fair holds share its batches.
func (s fairScheme) renewal(_, gen string, lease time.Duration) renewal {
	return renewal{call: lockRenewCall(s.l.keys.hash, gen, lease)}
}

// traits: FairLock's waiters queue in Redis and are handed the lock; the
// scheme is its own waitQueue.
func (s fairScheme) traits() traits { return traits{queue: s} }

// channel is where this Client's waiters are handed the lock.
func (s fairScheme) channel() string { return s.l.keys.waitChannel }

// leave takes a waiter that gave up out of the queue (see
// Client.leaveQueue).
func (s fairScheme) leave(ctx context.Context, owner, waiter string) {
	s.l.c.leaveQueue(ctx, fairAbandonCall(s.l.c, s.l.keys, owner, waiter))
}
