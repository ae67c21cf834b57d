package a

import (
	"context"
	"errors"
	"log"

	"github.com/relock-go/relock"
)

// Check 6: a hold that a path returns without releasing.

func leakOnEarlyReturn(ctx context.Context, l *relock.Lock, busy bool) error {
	hctx, err := l.Lock(ctx) // want `the hold hctx that l.Lock returned is not released on every path: the return at line 19 leaves it held \(under the watchdog, for the life of the process\); defer l.Unlock\(hctx\) right after the error check, or use l.Do\(ctx, func\(ctx context.Context\) error \{...\}\)`
	if err != nil {
		return err
	}
	if busy {
		return errors.New("busy")
	}
	return l.Unlock(hctx)
}

func leakNeverReleased(ctx context.Context, l *relock.FairLock) {
	hctx, err := l.TryLock(ctx, 0, 0) // want `the hold hctx that l.TryLock returned is not released on every path: the return at line 30`
	if err != nil {
		return
	}
	_ = hctx.Err()
}

func leakInSwitch(ctx context.Context, w *relock.WriteLock, n int) error {
	hctx, err := w.Lock(ctx) // want `the hold hctx that w.Lock returned is not released on every path: the return at line 39`
	if err != nil {
		return err
	}
	switch n {
	case 0:
		return nil
	}
	return w.Unlock(hctx)
}

// Not reported.

func noLeakDeferred(ctx context.Context, l *relock.Lock, busy bool) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	if busy {
		return errors.New("busy")
	}
	return work(hctx)
}

func noLeakDeferredClosure(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := l.Unlock(hctx); err != nil {
			log.Print(err)
		}
	}()
	return nil
}

func noLeakErrorPaths(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.TryLock(ctx, 0, 0)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil // err is not nil here: nothing is held
	}
	if err == nil {
		return l.Unlock(hctx)
	}
	return err
}

func noLeakReturned(ctx context.Context, l *relock.Lock) (context.Context, error) {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return hctx, nil // the caller releases it
}

type holdKeeper struct{ hold context.Context }

func (s *holdKeeper) noLeakStored(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	s.hold = hctx // released by whoever reads the field
	return nil
}

func noLeakHandedOn(ctx context.Context, l *relock.Lock, busy bool) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	if busy {
		return finish(l, hctx) // may release it: not followed
	}
	return l.Unlock(hctx)
}

func finish(l *relock.Lock, hctx context.Context) error { return l.Unlock(hctx) }

func noLeakFatal(ctx context.Context, l *relock.Lock, bad bool) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	if bad {
		log.Fatal("bad") // does not return
	}
	return l.Unlock(hctx)
}

func noLeakGoroutine(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	go func() { l.Unlock(hctx) }() // released elsewhere: not followed
	return nil
}

func noLeakAssertStyle(ctx context.Context, l *relock.Lock, ok func(error) bool) {
	held, err := l.Lock(ctx)
	if ok(err) { // which branch holds is not known: not followed
		l.Unlock(held)
	}
}

func leakAfterNegatedCheck(ctx context.Context, l *relock.Lock, busy bool) error {
	hctx, err := l.TryLock(ctx, 0, 0) // want `the hold hctx that l.TryLock returned is not released on every path: the return at line 147`
	if !(err == nil) {
		return err
	}
	if busy {
		return nil
	}
	return l.Unlock(hctx)
}

// An error derived from the hold is not the hold handed on, and a function
// of this package that only reads the hold does not release it.
func leakOnValidation(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx) // want `the hold hctx that l.Lock returned is not released on every path: the return at line 160`
	if err != nil {
		return err
	}
	if err := validate(hctx); err != nil {
		return err
	}
	return l.Unlock(hctx)
}

func leakOnCheckedWork(ctx context.Context, s *relock.Semaphore) error {
	hctx, err := s.Acquire(ctx, 1) // want `the hold hctx that s.Acquire returned is not released on every path: the return at line 172`
	if err != nil {
		return err
	}
	err = work(hctx)
	if err != nil {
		return err
	}
	return s.Release(hctx)
}

func validate(ctx context.Context) error {
	if v, _ := ctx.Value(key{}).(string); v == "" {
		return errors.New("no value")
	}
	return nested(ctx)
}

func nested(ctx context.Context) error { return ctx.Err() }

type key struct{}

func noLeakValidateReleases(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	if err := release(l, hctx); err != nil {
		return err // release let go of the hold
	}
	return nil
}

func release(l *relock.Lock, hctx context.Context) error { return finish(l, hctx) }

func noLeakDerivedContext(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	wctx := wrap(hctx)
	return l.Unlock(wctx)
}

func wrap(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, "v") }

func noLeakStoredByCallee(ctx context.Context, l *relock.Lock, k *holdKeeper) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	if err := k.keep(hctx); err != nil {
		return err
	}
	return nil
}

func (s *holdKeeper) keep(ctx context.Context) error {
	s.hold = ctx
	return nil
}

func noLeakInterface(ctx context.Context, l *relock.Lock, r interface{ Run(context.Context) error }) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	if err := r.Run(hctx); err != nil {
		return err // r may release it: not followed
	}
	return l.Unlock(hctx)
}
