package bench

import (
	"context"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// redislockMinBackoff is the smallest retry interval redislock's godoc
// recommends for ExponentialBackoff ("not less than 16ms"); its default
// strategy, NoRetry, does not block at all.
const (
	redislockMinBackoff = 16 * time.Millisecond
	redislockMaxBackoff = 256 * time.Millisecond
)

func redislockLibrary() Library {
	return Library{
		Name: "redislock",
		Strategy: "ExponentialBackoff(16 ms, 256 ms) — the minimum its godoc recommends; " +
			"its default, NoRetry, does not block; 30 s TTL",
		New: func(addr, prefix string, c *Counter) (Locker, error) {
			rdb := newGoredis(addr, c)
			return &redislockLocker{rdb: rdb, c: redislock.New(rdb), prefix: prefix + "redislock:"}, nil
		},
	}
}

type redislockLocker struct {
	rdb    *redis.Client
	c      *redislock.Client
	prefix string
}

func (r *redislockLocker) Lock(ctx context.Context, name string) (Unlocker, error) {
	// A strategy counts its retries: one per acquisition. Obtain bounds its
	// wait by the TTL unless ctx has a deadline; every scenario sets one.
	l, err := r.c.Obtain(ctx, r.prefix+name, floorLease, &redislock.Options{
		RetryStrategy: redislock.ExponentialBackoff(redislockMinBackoff, redislockMaxBackoff),
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return redislockHold{l}, nil
}

func (r *redislockLocker) Close() error { return r.rdb.Close() }

type redislockHold struct{ l *redislock.Lock }

func (h redislockHold) Unlock(ctx context.Context) error { return h.l.Release(ctx) }
