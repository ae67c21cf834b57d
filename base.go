package relock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// base is what every lock type of one name has: its Client, its key space
// and the error that makes every method fail (an invalid name, a Client that
// cannot be used). RWLock, Semaphore and CountDownLatch embed it, Lock,
// FairLock and SpinLock through exclusive; it carries what their methods
// share, so that each type's file holds only what differs.
type base struct {
	c   *Client
	ks  keyspace
	err error
}

// init makes b the base of the lock called name on c. It reports whether the
// name was read (validly or not): not when c is nil or unusable — a closed
// Client excepted, whose locks can still be queried and unlocked.
func (l *base) init(c *Client, name string) bool {
	l.c = c
	if c == nil {
		l.err = c.usable()
		return false
	}
	if err := c.usable(); err != nil && !errors.Is(err, ErrClientClosed) {
		l.err = err
		return false
	}
	l.ks, l.err = newKeyspace(c.opts.prefix, name)
	return true
}

// Name returns the name the lock was created with.
func (l *base) Name() string { return l.ks.name }

// tryLock is TryLock for t, a scheme of this lock (see soleOf).
func (l *base) tryLock(ctx context.Context, t target, wait, lease time.Duration) (context.Context, error) {
	if l.err != nil {
		return ctx, l.err
	}
	return lockWith(ctx, t, wait, lease)
}

// unlock is Unlock for t, a scheme of this lock (see soleOf).
func (l *base) unlock(ctx context.Context, t target) error {
	if l.err != nil {
		return l.err
	}
	return unlockWith(ctx, t)
}

// token is Token for the scheme s of this lock.
func (l *base) token(ctx context.Context, s scheme) (int64, error) {
	if l.err != nil {
		return 0, l.err
	}
	return tokenOf(ctx, s)
}

// check validates the arguments of a call that changes Redis and returns
// the context to run it on. It refuses a closed Client: such a call may
// start something new (see checkQuery for what works after Close).
func (l *base) check(ctx context.Context) (context.Context, error) {
	if l.err == nil {
		if err := l.c.usable(); err != nil {
			return nil, err
		}
	}
	return l.checkQuery(ctx)
}

// checkQuery validates a query's arguments and returns the context to run
// it on. A query only reads, so it works after Close, as Unlock does: the
// Client's connection to Redis is the caller's, not closed with it.
func (l *base) checkQuery(ctx context.Context) (context.Context, error) {
	if l.err != nil {
		return nil, l.err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return queryContext(ctx), nil
}

// queryContext lets a query run on a hold's context after the hold ended: a
// context relock itself cancelled (asking "do I still hold it?" after the
// lock was lost is the point) is detached; one the caller cancelled is not.
func queryContext(ctx context.Context) context.Context {
	if ctx.Err() == nil {
		return ctx
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrUnlocked) || errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrClientClosed) {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// forceUnlock is ForceUnlock: it runs the type's force-release call, which
// replies with the generations it removed, and ends this Client's holds
// registered as id of exactly those generations. The release may hand the
// lock to a waiter of this very Client, whose grant can be recorded before
// the reply arrives: that hold is Redis's newest, and stays. g is the
// call's guard (see ForceUnlockIf), the zero ForceGuard for none.
func (l *base) forceUnlock(ctx context.Context, g ForceGuard, id string, call scriptCall) (bool, error) {
	return l.forceRelease(ctx, g, call, func(gens []string, cause error) { l.c.endForced(id, gens, cause) })
}

// forceRelease runs call, a force-release script guarded by g that replies
// with the generations it removed (or with a refusal, see refusal), bounded
// by ctx, and hands them to end (with the cause their holds end with) once
// it has run.
func (l *base) forceRelease(ctx context.Context, g ForceGuard, call scriptCall, endGens func(gens []string, cause error)) (bool, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return false, err
	}
	// The script runs detached (a force-release cut short may still run);
	// the caller waits for it until ctx ends, and this Client's holds that
	// it removed end once it has run.
	end := func(gens []string) {
		if l.refusal(g, gens) == nil {
			endGens(gens, ErrForceUnlocked)
		}
	}
	gens, err, late := awaitBounded(ctx, time.Time{}, func() ([]string, error) {
		return l.c.eval(context.WithoutCancel(ctx), "force unlock", call).StringSlice()
	})
	if late != nil {
		l.c.goBackground(func() {
			if r := <-late; r.err == nil {
				end(r.v)
			}
		})
		return false, fmt.Errorf("relock: force unlock: %w: %w", context.Cause(ctx), l.c.unanswered("the force-release may still run"))
	}
	if err != nil {
		return false, err
	}
	if refused := l.refusal(g, gens); refused != nil {
		l.c.nameHolders(ctx, refused)
		return false, refused
	}
	end(gens)
	return len(gens) > 0, nil
}

// pttl returns the remaining lease of key, 0 when it has none.
func (l *base) pttl(ctx context.Context, key string) (time.Duration, error) {
	ctx, err := l.checkQuery(ctx)
	if err != nil {
		return 0, err
	}
	d, err := queryBounded(l.c, ctx, "ttl", func() (time.Duration, error) {
		return request(l.c, "ttl", l.c.rdb.PTTL(context.WithoutCancel(ctx), key).Result)
	})
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, nil // -2: no key; -1: no expiry, which relock never writes
	}
	return d, nil
}

// exclusive is the base of the locks whose state is one hash, owner → hold
// count, with the lease as its PTTL: Lock and FairLock. It carries their
// queries.
type exclusive struct {
	base
	// hash points at the lock's hash key in its keys (nil for an invalid
	// lock): a word, where a copy of the string takes two.
	hash *string
}

// Key returns the Redis key of the lock's hash.
func (l *exclusive) Key() string {
	if l.hash == nil {
		return ""
	}
	return *l.hash
}

// IsLocked reports whether anyone holds the lock.
func (l *exclusive) IsLocked(ctx context.Context) (bool, error) {
	ctx, err := l.checkQuery(ctx)
	if err != nil {
		return false, err
	}
	// A free Lock's hash lives on without a generation (~g): it keeps the
	// last token and the release latch (see release_common.lua).
	return queryBounded(l.c, ctx, "is locked", func() (bool, error) {
		return request(l.c, "is locked", func() (bool, error) {
			g, err := hashWithLayout(context.WithoutCancel(ctx), l.c.rdb, *l.hash, "~g")
			return g != nil, err
		})
	})
}

// HoldCount returns how many holds ctx's owner has, as Redis sees it.
func (l *exclusive) HoldCount(ctx context.Context) (int, error) {
	ctx, err := l.checkQuery(ctx)
	if err != nil {
		return 0, err
	}
	o := ownerFrom(ctx)
	if o == nil {
		return 0, nil
	}
	n, err := queryBounded(l.c, ctx, "hold count", func() (int, error) {
		return request(l.c, "hold count", l.c.rdb.HGet(context.WithoutCancel(ctx), *l.hash, o.field(l.c)).Int)
	})
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// TTL returns the lock's remaining lease, or 0 when it is not held.
func (l *exclusive) TTL(ctx context.Context) (time.Duration, error) {
	ctx, err := l.checkQuery(ctx)
	if err != nil {
		return 0, err
	}
	ms, err := queryBounded(l.c, ctx, "ttl", func() (int64, error) {
		return l.c.eval(context.WithoutCancel(ctx), "ttl", lockTTLCall(*l.hash)).Int64()
	})
	if err != nil || ms < 0 {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, nil
}
