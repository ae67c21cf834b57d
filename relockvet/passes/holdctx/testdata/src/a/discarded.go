package a

import (
	"context"
	"time"

	"github.com/relock-go/relock"
)

// Check 1: a discarded hold context.

func discardedDefine(ctx context.Context, l *relock.Lock) error {
	_, err := l.Lock(ctx) // want `the hold context returned by l.Lock is discarded: .*use l.Do\(.*or keep the returned context \(hctx, err := l.Lock\(...\)\) and pass it to l.Unlock\(hctx\)`
	return err
}

func discardedAssign(ctx context.Context, l *relock.FairLock) (err error) {
	_, err = l.TryLock(ctx, time.Second, 0) // want `the hold context returned by l.TryLock is discarded`
	return err
}

func discardedStmt(ctx context.Context, rw *relock.RWLock) {
	rw.WriteLock().Lock(ctx) // want `the hold context returned by rw.WriteLock\(\).Lock is discarded`
}

func discardedBoth(ctx context.Context, m *relock.MultiLock) {
	_, _ = m.Lock(ctx) // want `the hold context returned by m.Lock is discarded`
}

func discardedVar(ctx context.Context, r *relock.RedLock) error {
	var _, err = r.TryLock(ctx, 0, time.Minute) // want `the hold context returned by r.TryLock is discarded`
	return err
}

func discardedGo(ctx context.Context, l *relock.ReadLock) {
	go l.Lock(ctx) // want `the hold context returned by l.Lock is discarded`
}

// Not reported.

func kept(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	return nil
}

func scoped(ctx context.Context, l *relock.Lock) error {
	return l.Do(ctx, func(ctx context.Context) error {
		return nil
	})
}

func handle(c *relock.Client) *relock.Lock {
	c.Lock("orders") // (*Client).Lock makes a handle; it takes nothing
	return c.Lock("orders")
}

func returned(ctx context.Context, l *relock.Lock) (context.Context, error) {
	return l.Lock(ctx)
}

// Another package's Lock with the same shape is not relock's.
type other struct{}

func (other) Lock(ctx context.Context) (context.Context, error) { return ctx, nil }
func (other) Unlock(ctx context.Context) error                  { return nil }

func notRelock(ctx context.Context, o other) {
	_, _ = o.Lock(ctx)
	hctx, _ := o.Lock(ctx)
	_ = hctx
	o.Unlock(ctx)
}
