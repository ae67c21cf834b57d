package a

import (
	"context"
	"time"

	"github.com/relock-go/relock"
)

// Check 3: ctx, err = l.Lock(ctx) in a loop.

func loopFor(ctx context.Context, l *relock.Lock) error {
	var err error
	for i := 0; i < 3; i++ {
		ctx, err = l.Lock(ctx) // want `ctx, err = l.Lock\(ctx\) in a loop re-enters the hold on every iteration after the first \(ctx already holds it\); use l.Do in the loop body, or keep the hold in a new variable \(hctx, err := l.Lock\(...\)\) and pass it to l.Unlock\(hctx\) before the next iteration`
		if err != nil {
			return err
		}
		l.Unlock(ctx)
	}
	return nil
}

func loopRange(ctx context.Context, l *relock.ReadLock, items []string) (err error) {
	for range items {
		if ctx, err = l.TryLock(ctx, time.Second, 0); err != nil { // want `ctx, err = l.TryLock\(ctx\) in a loop re-enters the hold`
			return err
		}
	}
	return nil
}

func loopClosure(ctx context.Context, l *relock.Lock) {
	for {
		func() {
			var err error
			ctx, err = l.Lock(ctx) // want `ctx, err = l.Lock\(ctx\) in a loop`
			_ = err
		}()
	}
}

func loopInit(parent context.Context, l *relock.Lock) {
	var err error
	for ctx := parent; err == nil; {
		ctx, err = l.Lock(ctx) // want `ctx, err = l.Lock\(ctx\) in a loop`
	}
}

// Not reported.

func loopNewVar(ctx context.Context, l *relock.Lock) error {
	for i := 0; i < 3; i++ {
		hctx, err := l.Lock(ctx)
		if err != nil {
			return err
		}
		l.Unlock(hctx)
	}
	return nil
}

func loopShadow(ctx context.Context, l *relock.Lock) error {
	for i := 0; i < 3; i++ {
		ctx, err := l.Lock(ctx) // a new ctx each iteration
		if err != nil {
			return err
		}
		l.Unlock(ctx)
	}
	return nil
}

func loopDeclaredInside(parent context.Context, l *relock.Lock, items []string) {
	for range items {
		ctx := parent
		var err error
		ctx, err = l.Lock(ctx)
		if err == nil {
			l.Unlock(ctx)
		}
	}
}

func loopRangeVar(ctxs []context.Context, l *relock.Lock) {
	for _, ctx := range ctxs {
		var err error
		ctx, err = l.Lock(ctx) // range variables are fresh each iteration
		if err == nil {
			l.Unlock(ctx)
		}
	}
}

func loopDo(ctx context.Context, l *relock.Lock, items []string) error {
	for range items {
		if err := l.Do(ctx, func(ctx context.Context) error { return nil }); err != nil {
			return err
		}
	}
	return nil
}

func loopOwner(ctx context.Context, l *relock.Lock, n int) {
	for range n {
		go func(ctx context.Context) {
			ctx, err := l.Lock(ctx)
			if err == nil {
				l.Unlock(ctx)
			}
		}(relock.NewOwner(ctx))
	}
}

// Outside a loop the reassignment is fine.
func once(ctx context.Context, l *relock.Lock) error {
	var err error
	ctx, err = l.Lock(ctx)
	if err != nil {
		return err
	}
	return l.Unlock(ctx)
}

// Chaining different locks (one per iteration) is not a re-entry.
func chain(ctx context.Context, locks []*relock.Lock) {
	hctx := ctx
	var err error
	for _, l := range locks {
		if hctx, err = l.Lock(hctx); err != nil {
			return
		}
	}
	for i := len(locks) - 1; i >= 0; i-- {
		locks[i].Unlock(hctx)
	}
}
