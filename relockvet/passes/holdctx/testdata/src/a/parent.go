package a

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock"
)

// Check 7: the parent context used where the hold is meant.

func tokenOfParent(ctx context.Context, l *relock.Lock, rdb *redis.Client) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	tok, err := l.Token(ctx) // want `l.Token is given ctx, not the hold hctx: ctx carries no owner of l's hold; pass hctx`
	if err != nil {
		return err
	}
	_ = tok
	return rdb.Set(hctx, "k", 1).Err()
}

func nestedLockWithParent(ctx context.Context, c *relock.Client) error {
	l, m := c.Lock("orders"), c.FairLock("stock")
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	mctx, err := m.Lock(ctx) // want `m.Lock is given ctx while the hold hctx of l is live: it locks as a new owner`
	if err != nil {
		return err
	}
	return m.Unlock(mctx)
}

func nestedInlineWithParent(ctx context.Context, c *relock.Client) error {
	rw := c.RWLock("prices")
	r := rw.ReadLock()
	hctx, err := r.Lock(ctx)
	if err != nil {
		return err
	}
	defer r.Unlock(hctx)
	return c.Lock("audit").Do(ctx, func(ctx context.Context) error { return nil }) // want `c.Lock\("audit"\).Do is given ctx while the hold hctx of r is live`
}

func sameLockWithParent(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	return l.Do(ctx, func(ctx context.Context) error { return nil }) // want `l.Do is given ctx while the hold hctx of l is live`
}

func workWithParent(ctx context.Context, l *relock.Lock, rdb *redis.Client) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	_, err = rdb.Decr(ctx, "stock").Result() // want `rdb.Decr is given ctx, not the hold hctx, while l is held: the work goes on if the lock is lost`
	return err
}

func workWithParentInDo(ctx context.Context, l *relock.WriteLock, rdb redis.Cmdable) error {
	return l.Do(ctx, func(hctx context.Context) error {
		return rdb.Set(ctx, "k", 1).Err() // want `rdb.Set is given ctx, not the hold hctx, while l is held`
	})
}

func tokenOfParentInDo(ctx context.Context, l *relock.FairLock) error {
	return l.Do(ctx, func(hctx context.Context) error {
		_, err := l.Token(ctx) // want `l.Token is given ctx, not the hold hctx`
		return err
	})
}

// Not reported.

func parentAfterRelease(ctx context.Context, l *relock.Lock, rdb *redis.Client) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return rdb.Set(ctx, "failed", 1).Err() // the error branch holds nothing
	}
	if err := rdb.Set(hctx, "k", 1).Err(); err != nil {
		l.Unlock(hctx)
		return err
	}
	if err := l.Unlock(hctx); err != nil {
		return err
	}
	return rdb.Set(ctx, "after", 1).Err() // the hold is released
}

func parentForLoggingAndDerivation(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	slog.InfoContext(ctx, "locked")
	wctx := context.WithoutCancel(hctx)
	_ = wctx
	_, err = l.IsLocked(ctx) // not a question about the owner
	return err
}

func nestedWithHold(ctx context.Context, l *relock.Lock, m *relock.Lock, rdb *redis.Client) error {
	actx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(actx)
	bctx, err := m.Lock(actx) // nests under the hold
	if err != nil {
		return err
	}
	defer m.Unlock(bctx)
	return rdb.Set(actx, "k", 1).Err() // actx is a hold itself: quiet
}

func doShadowsTheParent(ctx context.Context, l *relock.Lock, rdb *redis.Client) error {
	return l.Do(ctx, func(ctx context.Context) error {
		return rdb.Set(ctx, "k", 1).Err() // ctx is the hold here
	})
}

func semaphoreDoWithParentLock(ctx context.Context, s *relock.Semaphore, rdb *redis.Client) error {
	return s.Do(ctx, 1, func(pctx context.Context) error {
		return rdb.Set(pctx, "k", 1).Err()
	})
}

// Two Clients stand for two processes in one program: the second takes
// the lock as another owner on purpose.
func twoProcesses(ctx context.Context, procA, procB *relock.Client) error {
	a := procA.Lock("orders")
	held, err := a.Lock(ctx)
	if err != nil {
		return err
	}
	defer a.Unlock(held)
	b := procB.Lock("orders")
	other, err := b.TryLock(ctx, 0, 0)
	if err == nil {
		return b.Unlock(other)
	}
	return err
}

// A Lock's or TryLock's hold taken in an if statement's header is scoped
// to that statement.
func scopedToIf(ctx context.Context, l *relock.Lock) error {
	if held, err := l.TryLock(ctx, 0, 0); err == nil {
		l.Unlock(held)
	}
	held, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	return l.Unlock(held)
}

// Closing the Client releases its holds; a hold whose Done was received
// has ended.
func closedClient(ctx context.Context, c *relock.Client, rdb *redis.Client) error {
	l := c.Lock("x")
	held, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	rdb.Set(held, "k", 1)
	return c.Close()
}

func heldUntilLost(ctx context.Context, l *relock.Lock, rdb *redis.Client) error {
	held, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	rdb.Set(held, "k", 1)
	<-held.Done()
	return nil
}
