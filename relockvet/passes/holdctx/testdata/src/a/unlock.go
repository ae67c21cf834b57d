package a

import (
	"context"
	"time"

	"github.com/relock-go/relock"
)

// Check 2: Unlock given another context than the hold.

func unlockParent(ctx context.Context, l *relock.Lock) error {
	ctx2, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	_ = ctx2
	defer l.Unlock(ctx) // want `l.Unlock is given ctx, not the hold context ctx2 that l.Lock/TryLock returned here \(ctx2 is never released\); pass ctx2 \(or a context derived from it\) to l.Unlock, or use l.Do\(ctx, func\(ctx context.Context\) error \{...\}\)`
	return nil
}

func unlockParentAfterWork(ctx context.Context, m *relock.MultiLock) error {
	hctx, err := m.TryLock(ctx, time.Second, 0)
	if err != nil {
		return err
	}
	defer m.Unlock(ctx) // want `m.Unlock is given ctx, not the hold context hctx that m.Lock/TryLock returned here \(hctx is never released\)`
	return work(hctx)
}

func work(ctx context.Context) error { return ctx.Err() }

type svc struct {
	mu *relock.FairLock
}

func (s *svc) unlockField(ctx context.Context) error {
	hctx, err := s.mu.TryLock(ctx, time.Second, 0)
	if err != nil {
		return err
	}
	defer func() { _ = s.mu.Unlock(ctx) }() // want `s.mu.Unlock is given ctx, not the hold context hctx that s.mu.Lock/TryLock returned here`
	_ = hctx
	return nil
}

func unlockOtherHold(ctx context.Context, a, b *relock.Lock) {
	actx, _ := a.Lock(ctx)
	bctx, _ := b.Lock(ctx)
	b.Unlock(bctx)
	a.Unlock(bctx) // want `a.Unlock is given bctx, a hold context of b \(from b.Lock\), not of a: it does not release a's hold; pass a's own hold context \(actx\) to a.Unlock`
	_ = actx
}

// Not reported.

func unlockHold(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(hctx)
	return nil
}

func unlockDerived(ctx context.Context, l *relock.WriteLock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(hctx, time.Second)
	defer cancel()
	var c context.Context = tctx
	return l.Unlock(c)
}

func unlockInClosure(ctx context.Context, l *relock.Lock) error {
	hctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = l.Unlock(hctx) }()
	defer func(c context.Context) { _ = l.Unlock(c) }(hctx)
	return nil
}

func reentry(ctx context.Context, l *relock.Lock) {
	outer, _ := l.Lock(ctx)
	inner, _ := l.Lock(outer)
	l.Unlock(inner)
	l.Unlock(outer)
}

// The hold came from elsewhere: the function takes no lock on l.
func unlockGiven(hctx context.Context, l *relock.Lock) error {
	return l.Unlock(hctx)
}

// The hold is stored where the analyzer does not follow it.
type holder struct {
	l    *relock.Lock
	hold context.Context
}

func (h *holder) acquire(ctx context.Context) error {
	hctx, err := h.l.Lock(ctx)
	h.hold = hctx
	return err
}

func (h *holder) lockAndUnlock(ctx context.Context) error {
	var err error
	h.hold, err = h.l.Lock(ctx)
	if err != nil {
		return err
	}
	c := h.hold
	return h.l.Unlock(c)
}

// Reassigned outside a loop: ctx is the hold from then on.
func reassigned(ctx context.Context, l *relock.Lock) error {
	ctx, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer l.Unlock(ctx)
	return nil
}

// Different lock handles made by calls are not compared.
func handles(ctx context.Context, c *relock.Client) {
	hctx, _ := c.Lock("a").Lock(ctx)
	c.Lock("a").Unlock(ctx)
	_ = hctx
}

// Holds handed between goroutines: the goroutine's hold is sent, the
// receiver releases what it gets.
func handOff(bg context.Context, l *relock.Lock, holder context.Context) {
	got := make(chan context.Context, 1)
	go func() {
		ctx, err := l.Lock(bg)
		if err == nil {
			got <- ctx
		}
	}()
	l.Unlock(holder)
	next := <-got
	l.Unlock(next)
}

// A re-entry of a hold received from elsewhere, released inner first.
func reenterReceived(l *relock.Lock, got chan context.Context) {
	ctx := <-got
	inner, err := l.Lock(ctx)
	if err != nil {
		return
	}
	l.Unlock(inner)
	l.Unlock(ctx)
}

// The hold is returned to the caller, who releases it.
func lockOrRelease(ctx context.Context, l *relock.Lock, prev context.Context) (context.Context, error) {
	l.Unlock(prev)
	hctx, err := l.Lock(ctx)
	return hctx, err
}

// Two holds, each released with its own context.
func twoHolds(ctx context.Context, l *relock.Lock) {
	a, _ := l.Lock(ctx)
	l.Unlock(a)
	b, _ := l.Lock(ctx)
	defer func() { _ = l.Unlock(context.WithoutCancel(b)) }()
}
