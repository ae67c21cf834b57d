package a

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/relock-go/relock"
)

// Check 4: a hold context shared into goroutines that lock with it.

func sharedIntoGo(ctx context.Context, l, item *relock.Lock, jobs []string) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	for range jobs {
		go func() {
			ictx, err := item.Lock(hctx) // want `item.Lock in a goroutine is given hctx, a hold context taken outside it: goroutines that share a hold context are one owner, so item re-enters instead of excluding them; give the goroutine its own owner: item.Lock\(relock.NewOwner\(hctx\), ...\)`
			if err == nil {
				item.Unlock(ictx)
			}
		}()
	}
	return nil
}

func sharedIntoErrgroup(ctx context.Context, l *relock.Lock, item *relock.FairLock, jobs []string) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	g, gctx := errgroup.WithContext(hctx) // derived: still hctx's owner
	for range jobs {
		g.Go(func() error {
			return item.Do(gctx, func(ctx context.Context) error { return nil }) // want `item.Do in a goroutine is given gctx, a hold context taken outside it`
		})
	}
	return g.Wait()
}

func sharedDerivedTimeout(ctx context.Context, l *relock.Lock, w *relock.WriteLock) {
	hctx, _ := l.Lock(ctx)
	defer l.Unlock(hctx)
	tctx, cancel := context.WithTimeout(hctx, time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if c, err := w.TryLock(tctx, time.Second, 0); err == nil { // want `w.TryLock in a goroutine is given tctx, a hold context taken outside it`
			w.Unlock(c)
		}
	})
	wg.Wait()
}

func sharedFromDo(ctx context.Context, l *relock.Lock, m *relock.MultiLock) error {
	return l.Do(ctx, func(hctx context.Context) error {
		go m.Lock(context.WithoutCancel(hctx)) // want `the hold context returned by m.Lock is discarded` `m.Lock in a goroutine is given hctx, a hold context taken outside it`
		return nil
	})
}

// Not reported.

// Each goroutine gets its own owner: NewOwner keeps the hold's values and
// cancellation, not its owner.
func ownOwners(ctx context.Context, l, item *relock.Lock, jobs []string) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	g, gctx := errgroup.WithContext(hctx)
	for range jobs {
		g.Go(func() error {
			return item.Do(relock.NewOwner(gctx), func(ctx context.Context) error { return nil })
		})
		octx := relock.NewOwner(hctx)
		go func() {
			if c, err := item.Lock(octx); err == nil {
				item.Unlock(c)
			}
		}()
	}
	return g.Wait()
}

// The goroutine takes its own hold and locks with it; the hold is not
// shared.
func ownHold(ctx context.Context, l, item *relock.Lock) {
	go func() {
		hctx, err := l.Lock(ctx)
		if err != nil {
			return
		}
		defer l.Unlock(hctx)
		if c, err := item.Lock(hctx); err == nil { // re-entry of its own owner
			item.Unlock(c)
		}
	}()
}

// Goroutines that work under the hold without locking with it.
func workUnderHold(ctx context.Context, l *relock.Lock) {
	hctx, _ := l.Lock(ctx)
	defer l.Unlock(hctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = work(hctx) })
	wg.Wait()
}

// A context parameter may or may not be a hold: left alone.
func paramContext(ctx context.Context, item *relock.Lock) {
	go func() {
		if c, err := item.Lock(ctx); err == nil {
			item.Unlock(c)
		}
	}()
}
