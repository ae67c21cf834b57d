package a

import (
	"context"
	"time"

	"github.com/relock-go/relock"
	"golang.org/x/sync/errgroup"
)

// A Semaphore's Acquire, TryAcquire and Release follow the hold-context
// contract of Lock, TryLock and Unlock.

func semaDiscarded(ctx context.Context, s *relock.Semaphore) error {
	_, err := s.Acquire(ctx, 1) // want `the hold context returned by s.Acquire is discarded: nothing can Release this hold .*use s.Do\(ctx, n, func\(ctx context.Context\) error \{...\}\), or keep the returned context \(hctx, err := s.Acquire\(...\)\) and pass it to s.Release\(hctx\)`
	return err
}

func semaTryDiscarded(ctx context.Context, c *relock.Client) {
	c.Semaphore("x", 2).TryAcquire(ctx, 1, time.Second, 0) // want `the hold context returned by c.Semaphore\("x", 2\).TryAcquire is discarded`
}

func semaReleaseParent(ctx context.Context, s *relock.Semaphore) error {
	hctx, err := s.Acquire(ctx, 2)
	if err != nil {
		return err
	}
	defer s.Release(ctx) // want `s.Release is given ctx, not the hold context hctx that s.Acquire/TryAcquire returned here \(hctx is never released\); pass hctx \(or a context derived from it\) to s.Release, or use s.Do\(ctx, n, func\(ctx context.Context\) error \{...\}\)`
	return work(hctx)
}

func semaLeak(ctx context.Context, s *relock.Semaphore, busy bool) error {
	hctx, err := s.TryAcquire(ctx, 1, time.Second, 0) // want `the hold hctx that s.TryAcquire returned is not released on every path: the return at line 38 leaves it held \(under the watchdog, for the life of the process\); defer s.Release\(hctx\) right after the error check, or use s.Do\(ctx, n, func\(ctx context.Context\) error \{...\}\)`
	if err != nil {
		return err
	}
	if busy {
		return nil
	}
	return s.Release(hctx)
}

func semaReleaseLockHold(ctx context.Context, l *relock.Lock, s *relock.Semaphore) {
	lctx, _ := l.Lock(ctx)
	sctx, _ := s.Acquire(ctx, 1)
	l.Unlock(lctx)
	s.Release(lctx) // want `s.Release is given lctx, a hold context of l \(from l.Lock\), not of s: it does not release s's hold; pass s's own hold context \(sctx\) to s.Release`
	_ = sctx
}

// Not reported.

func semaReleased(ctx context.Context, s *relock.Semaphore) error {
	hctx, err := s.Acquire(ctx, 1)
	if err != nil {
		return err
	}
	defer s.Release(hctx)
	return work(hctx)
}

// Acquires are never re-entries: each takes permits of its own, so neither
// a loop that acquires with the last hold nor goroutines that acquire with
// a shared hold are check 3's and check 4's mistakes.
func semaLoop(ctx context.Context, s *relock.Semaphore, n int) error {
	var err error
	for i := 0; i < n; i++ {
		ctx, err = s.Acquire(ctx, 1)
		if err != nil {
			return err
		}
	}
	return nil
}

func semaShared(ctx context.Context, l *relock.Lock, s *relock.Semaphore, jobs []string) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	var g errgroup.Group
	for range jobs {
		g.Go(func() error {
			return s.Do(hctx, 1, func(ctx context.Context) error { return nil })
		})
		g.Go(func() error {
			sctx, err := s.Acquire(hctx, 1)
			if err != nil {
				return err
			}
			return s.Release(sctx)
		})
	}
	return g.Wait()
}

// A permit taken for its fixed lease and never given back is an expirable
// permit (a rate limit), and a hold with a fixed lease that a path leaves
// held ends by itself: neither is reported.
func semaRateLimit(ctx context.Context, s *relock.Semaphore) error {
	_, err := s.TryAcquire(ctx, 1, 0, time.Second)
	return err
}

func lockLeftToLapse(ctx context.Context, l *relock.Lock, busy bool) error {
	hctx, err := l.TryLock(ctx, 0, 50*time.Millisecond)
	if err != nil {
		return err
	}
	if busy {
		return nil
	}
	return l.Unlock(hctx)
}

func semaForceReleased(ctx context.Context, s *relock.Semaphore) error {
	hctx, err := s.Acquire(ctx, 1)
	if err != nil {
		return err
	}
	_ = work(hctx)
	_, err = s.ForceRelease(ctx) // ends every hold of s, hctx's too
	return err
}
