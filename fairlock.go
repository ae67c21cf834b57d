package relock

import (
	"context"
	"time"
)

// FairLock is a Lock granted in request order, like Redisson's fair lock.
type FairLock struct {
	exclusive // Name, Key and the queries
	keys      fairKeys
}

type fairKeys struct {
	// hash is the lock; free, it keeps the last token and the latch of the
	// last final releases for the unlock latch (see release_common.lua).
	// queue exists while waiters do (see fair_common.lua).
	hash, queue, channel string
	// forced keeps the force releases' answers for a replay (see
	// force_common.lua), written only by a force release.
	forced string
	// waitChannel is where releases hand the lock over to this Client's
	// waiters: <hash>:w:<client id> (see queue_common.lua).
	waitChannel string
	// The KEYS of the acquire, of the release (and abandon) and of the
	// force release scripts, boxed once: see keySet.
	acquireKeys, releaseKeys, forceKeys keySet
}

func fairKeysOf(ks keyspace) fairKeys {
	k := fairKeys{hash: ks.key("fair"), queue: ks.key("fair:z"), forced: ks.key("fair:last"),
		channel: ks.key("fair:ch")}
	hash := any(k.hash)
	k.acquireKeys = keySet{[]string{k.hash, k.queue}, hash}
	k.releaseKeys = keySet{[]string{k.hash, k.queue, k.channel}, hash}
	k.forceKeys = keySet{[]string{k.hash, k.queue, k.channel, k.forced}, hash}
	return k
}

// FairLock returns the fair lock called name, as Client.Lock does.
func (c *Client) FairLock(name string) *FairLock {
	l := &FairLock{}
	if l.init(c, name) {
		l.keys = fairKeysOf(l.ks)
		l.keys.waitChannel = handOverChannel(l.keys.hash, c.id)
		l.hash = &l.keys.hash
	}
	return l
}

// Lock is Lock.Lock in ctx's owner's turn; on failure it leaves the queue.
func (l *FairLock) Lock(ctx context.Context) (context.Context, error) {
	return l.TryLock(ctx, WaitForever, 0)
}

// TryLock is Lock.TryLock in turn: wait 0 succeeds only if nobody queues.
func (l *FairLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return l.tryLock(ctx, soleOf(fairScheme{l}), wait, lease)
}

// Unlock is Lock.Unlock; the final one hands the lock to the next waiter.
func (l *FairLock) Unlock(ctx context.Context) error { return l.unlock(ctx, soleOf(fairScheme{l})) }

// ForceUnlock is Lock.ForceUnlock; the queue keeps its order.
func (l *FairLock) ForceUnlock(ctx context.Context) (bool, error) {
	return l.forceUnlock(ctx, ForceGuard{}, l.keys.hash, fairForceReleaseCall(l.c, l.keys, ForceGuard{}))
}

// Token is Lock.Token, with this FairLock's own counter.
func (l *FairLock) Token(ctx context.Context) (int64, error) { return l.token(ctx, fairScheme{l}) }

// fairScheme runs FairLock's scripts.
type fairScheme struct{ l *FairLock }

func (s fairScheme) client() *Client { return s.l.c }
func (s fairScheme) holdID() string  { return s.l.keys.hash }

func (s fairScheme) info() LockInfo { return LockInfo{Name: s.l.ks.name, Kind: KindFairLock} }

func (s fairScheme) acquire(ctx context.Context, r acquireReq) (attempt, error) {
	l := s.l
	a, err := l.c.runAcquire(ctx, fairAcquireCall(l.c, l.keys, r), l.keys.waitChannel, nil)
	if a.outcome == busy && r.waiter {
		// The next attempt renews the queue's lifetime: it must come well
		// before the waiter timeout, whatever the holder's lease.
		a.retryIn = l.c.refreshWithin(a.retryIn)
	}
	return a, err
}

func (s fairScheme) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	l := s.l
	return l.c.runRelease(ctx, fairReleaseCall(l.c, l.keys, r))
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
func (s fairScheme) leave(ctx context.Context, owner, waiter string, lease time.Duration) {
	l := s.l
	l.c.leaveQueue(ctx, abandonCall(l.c, fairAbandonScript, l.keys.releaseKeys, owner, waiter, lease))
}
