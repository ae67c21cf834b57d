package bench

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func relockLibrary() Library {
	return relockKind("relock", "pub/sub wake-up (one shared subscriber per Client), watchdog lease",
		func(c *relock.Client, name string) relockLock { return c.Lock(name) })
}

// relockFairLibrary is relock's FairLock: FIFO across processes, the lock
// handed over to the next waiter inside the release.
func relockFairLibrary() Library {
	return relockKind("relock-fair", "FairLock: FIFO queue in Redis, handed over to the next waiter inside the release, watchdog lease",
		func(c *relock.Client, name string) relockLock { return c.FairLock(name) })
}

// relockDefaultLibrary is relock's Lock on go-redis's default client
// (ContextTimeoutEnabled off whatever -ctxtimeout says): beside "relock"
// in one run, the two go-redis setups.
func relockDefaultLibrary() Library {
	return relockKind(relockDefaultName, "Lock on go-redis's default *redis.Client (ContextTimeoutEnabled false, 3 s timeouts), whatever -ctxtimeout says",
		func(c *relock.Client, name string) relockLock { return c.Lock(name) })
}

// relockLock is what relock's exclusive lock types have in common here.
type relockLock interface {
	Lock(ctx context.Context) (context.Context, error)
	Unlock(ctx context.Context) error
}

// relockKind builds the Library of one relock lock type; opts go to each
// Locker's Client.
func relockKind(name, strategy string, open func(*relock.Client, string) relockLock, opts ...relock.Option) Library {
	return Library{
		Name:     name,
		Strategy: strategy,
		New: func(addr, prefix string, c *Counter) (Locker, error) {
			rdb := newGoredisWith(addr, c, contextTimeout.Load() && name != relockDefaultName)
			rc := relock.New(rdb, append([]relock.Option{relock.WithKeyPrefix(prefix + name)}, opts...)...)
			if err := rc.Err(); err != nil {
				_ = rdb.Close()
				return nil, err
			}
			return &relockLocker{rdb: rdb, c: rc, open: open}, nil
		},
	}
}

type relockLocker struct {
	rdb  *redis.Client
	c    *relock.Client
	open func(*relock.Client, string) relockLock
}

// Lock takes a lock value per call, as a caller that names its lock where it
// needs it would; the value is cheap and sends nothing to Redis.
func (r *relockLocker) Lock(ctx context.Context, name string) (Unlocker, error) {
	l := r.open(r.c, name)
	held, err := l.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return relockHold{l, held}, nil
}

func (r *relockLocker) LockAgain(_ context.Context, u Unlocker) (Unlocker, error) {
	h := u.(relockHold)
	held, err := h.l.Lock(h.ctx)
	if err != nil {
		return nil, err
	}
	return relockHold{h.l, held}, nil
}

func (r *relockLocker) Close() error {
	_ = r.c.Close()
	return r.rdb.Close()
}

type relockHold struct {
	l   relockLock
	ctx context.Context
}

func (h relockHold) Unlock(context.Context) error { return h.l.Unlock(h.ctx) }
