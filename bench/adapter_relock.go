package bench

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func relockLibrary() Library {
	return Library{
		Name:     "relock",
		Strategy: "pub/sub wake-up (one shared subscriber per Client), watchdog lease",
		New: func(addr, prefix string, c *Counter) (Locker, error) {
			rdb := newGoredis(addr, c)
			rc := relock.New(rdb, relock.WithKeyPrefix(prefix+"relock"))
			if err := rc.Err(); err != nil {
				_ = rdb.Close()
				return nil, err
			}
			return &relockLocker{rdb: rdb, c: rc}, nil
		},
	}
}

type relockLocker struct {
	rdb *redis.Client
	c   *relock.Client
}

// Lock takes a Lock value per call, as a caller that names its lock where it
// needs it would; the value is cheap and sends nothing to Redis.
func (r *relockLocker) Lock(ctx context.Context, name string) (Unlocker, error) {
	l := r.c.Lock(name)
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
	l   *relock.Lock
	ctx context.Context
}

func (h relockHold) Unlock(context.Context) error { return h.l.Unlock(h.ctx) }
