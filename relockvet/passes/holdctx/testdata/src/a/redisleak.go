package a

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock"
	"jobs"
)

// Check 6: a hold given to a call that cannot release it (a go-redis
// command, a function of another package that is given no lock) does not
// end the path: the return after it leaks.

func leakAfterRedisCall(ctx context.Context, l *relock.Lock, rdb *redis.Client) error {
	hctx, err := l.Lock(ctx) // want `the hold hctx that l.Lock returned is not released on every path: the return at line 23`
	if err != nil {
		return err
	}
	n, err := rdb.Decr(hctx, "stock").Result()
	if err != nil {
		return err // the hold leaks
	}
	_ = n
	return l.Unlock(hctx)
}

func leakAfterUniversalClient(ctx context.Context, l *relock.FairLock, rdb redis.UniversalClient) error {
	hctx, err := l.Lock(ctx) // want `the hold hctx that l.Lock returned is not released on every path: the return at line 35`
	if err != nil {
		return err
	}
	if err := rdb.Set(hctx, "k", 1).Err(); err != nil {
		return err
	}
	return l.Unlock(hctx)
}

func leakAfterSemaphoreWork(ctx context.Context, s *relock.Semaphore, rdb redis.Cmdable) error {
	hctx, err := s.Acquire(ctx, 1) // want `the hold hctx that s.Acquire returned is not released on every path: the return at line 46`
	if err != nil {
		return err
	}
	if _, err := rdb.Decr(hctx, "permits").Result(); err != nil {
		return err
	}
	return s.Release(hctx)
}

// Not reported: the other package's function is given the lock too, or the
// release is deferred.

func noLeakDeferredRedis(ctx context.Context, l *relock.Lock, rdb *redis.Client) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	_, err = rdb.Decr(hctx, "stock").Result()
	return err
}

func noLeakOtherPackageGivenTheLock(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	if err := jobs.Finish(hctx, l); err != nil {
		return errors.New("handed on") // ReleaseLater may have released it
	}
	return l.Unlock(hctx)
}
