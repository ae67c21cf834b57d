package relock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
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
	c    *Client
	ks   keyspace
	err  error
	keys fairKeys
}

type fairKeys struct {
	hash, queue, timeouts, tail, latchPrefix, chPrefix string
}

// FairLock returns the fair lock called name. It sends nothing to Redis. An
// empty or oversized name does not panic: every method of the returned
// FairLock then fails with ErrInvalidArgument.
func (c *Client) FairLock(name string) *FairLock {
	l := &FairLock{c: c}
	if c == nil {
		l.err = c.usable()
		return l
	}
	if err := c.usable(); err != nil && !errors.Is(err, ErrClientClosed) {
		l.err = err
		return l
	}
	l.ks, l.err = newKeyspace(c.opts.prefix, name)
	l.keys = fairKeys{
		hash:        l.ks.key("fair"),
		queue:       l.ks.key("fair:queue"),
		timeouts:    l.ks.key("fair:timeouts"),
		tail:        l.ks.key("fair:tail"),
		latchPrefix: l.ks.key("fair:latch:"),
		chPrefix:    l.ks.key("fair:ch:"),
	}
	return l
}

// Name returns the name the lock was created with.
func (l *FairLock) Name() string { return l.ks.name }

// Key returns the Redis key of the lock's hash (owner → hold count).
func (l *FairLock) Key() string { return l.keys.hash }

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
	if l.err != nil {
		return ctx, l.err
	}
	return lockWith(ctx, fairScheme{l}, wait, lease)
}

// Unlock releases one hold of ctx's owner; the final one frees the lock and
// wakes the next waiter in the queue, and nobody else. Errors and
// cancellation are as for Lock.Unlock: it works with a cancelled ctx, returns
// ErrNotHeld (changing nothing) when ctx's owner holds nothing and
// ErrLockLost when the hold was lost.
func (l *FairLock) Unlock(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	return unlockWith(ctx, fairScheme{l})
}

// ForceUnlock frees the lock whoever holds it and wakes the next waiter; the
// queue keeps its order. It reports whether the lock was held. This Client's
// holds end at once (ErrLockLost); other processes learn it at their next
// renewal, Unlock or lease end.
func (l *FairLock) ForceUnlock(ctx context.Context) (bool, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return false, err
	}
	n, err := fairForceReleaseCall(l.c, l.keys).run(context.WithoutCancel(ctx), l.c.rdb).Int64()
	if err != nil {
		return false, wrapRedis("force unlock", err)
	}
	l.c.endAll(l.keys.hash, fmt.Errorf("%w: force-unlocked", ErrLockLost))
	return n == 1, nil
}

// IsLocked reports whether anyone holds the lock.
func (l *FairLock) IsLocked(ctx context.Context) (bool, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return false, err
	}
	n, err := l.c.rdb.Exists(ctx, l.keys.hash).Result()
	return n == 1, wrapRedis("is locked", err)
}

// HoldCount returns how many holds ctx's owner has on the lock, as Redis
// sees it (0 when it holds none, or ctx carries no owner).
func (l *FairLock) HoldCount(ctx context.Context) (int, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return 0, err
	}
	return hashCount(ctx, l.c, l.keys.hash, "")
}

// HeldBy reports whether ctx's owner holds the lock, as Redis sees it.
func (l *FairLock) HeldBy(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// TTL returns the lock's remaining lease, or 0 when it is not held.
func (l *FairLock) TTL(ctx context.Context) (time.Duration, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return 0, err
	}
	return keyTTL(ctx, l.c, l.keys.hash)
}

// Token returns the fencing token of ctx's hold, as Lock.Token does; the
// counter is this FairLock's own. It reports ErrNotHeld when ctx's owner
// holds no hold of this Client.
func (l *FairLock) Token(ctx context.Context) (int64, error) {
	if l.err != nil {
		return 0, l.err
	}
	return tokenOf(ctx, fairScheme{l})
}

func (l *FairLock) check(ctx context.Context) (context.Context, error) {
	if l.err != nil {
		return nil, l.err
	}
	return checkQuery(l.c, ctx)
}

// checkQuery validates a query's arguments and returns the context to run
// it on.
func checkQuery(c *Client, ctx context.Context) (context.Context, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return queryContext(ctx), nil
}

// hashCount reads the hold count of ctx's owner, whose field in hash is
// prefix + owner.
func hashCount(ctx context.Context, c *Client, hash, prefix string) (int, error) {
	o := ownerFrom(ctx)
	if o == nil {
		return 0, nil
	}
	n, err := c.rdb.HGet(ctx, hash, prefix+o.field(c)).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, wrapRedis("hold count", err)
}

func keyTTL(ctx context.Context, c *Client, key string) (time.Duration, error) {
	d, err := c.rdb.PTTL(ctx, key).Result()
	if err != nil {
		return 0, wrapRedis("ttl", err)
	}
	if d < 0 {
		return 0, nil
	}
	return d, nil
}

// fairScheme runs FairLock's scripts.
type fairScheme struct{ l *FairLock }

func (s fairScheme) client() *Client { return s.l.c }
func (s fairScheme) holdID() string  { return s.l.keys.hash }

func (s fairScheme) info() LockInfo { return LockInfo{Name: s.l.ks.name, Kind: KindFairLock} }

func (s fairScheme) acquire(ctx context.Context, r acquireReq) (attempt, error) {
	l := s.l
	res, repl, err := l.c.evalAcquire(ctx, fairAcquireScript,
		[]string{l.keys.hash, l.keys.queue, l.keys.timeouts, l.keys.tail, l.keys.chPrefix},
		r.owner, r.op, r.gen, r.lease.Milliseconds(), l.c.fencingArg(), l.c.opts.waiterTimeout.Milliseconds(), l.c.publishCommand())
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
	n, err := fairReleaseScript.Run(ctx, l.c.rdb,
		[]string{l.keys.hash, l.keys.queue, l.keys.timeouts, l.keys.chPrefix, l.keys.latchPrefix + r.op, l.keys.tail},
		r.owner, r.op, r.gen, boolArg(r.final), l.c.publishCommand(), l.c.opts.unlockLatch.Milliseconds()).Int64()
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

func (s fairScheme) abandon(ctx context.Context, owner string) {
	l := s.l
	err := fairAbandonCall(l.c, l.keys, owner).run(ctx, l.c.rdb).Err()
	if err != nil {
		// Not fatal: the waiter's deadline evicts it.
		l.c.log.Warn("relock: could not leave a fair lock's queue; it will be evicted at its deadline",
			"lock", l.ks.name, "err", err)
	}
}
