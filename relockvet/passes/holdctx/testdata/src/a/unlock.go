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
	defer l.Unlock(ctx) // want `l.Unlock is given ctx, not the hold context this function got from l.Lock/TryLock; pass that context \(l.Unlock\(ctx2\)\) or one derived from it, or use l.Do`
	return nil
}

type svc struct {
	mu *relock.FairLock
}

func (s *svc) unlockField(ctx context.Context) error {
	hctx, err := s.mu.TryLock(ctx, time.Second, 0)
	if err != nil {
		return err
	}
	defer func() { _ = s.mu.Unlock(ctx) }() // want `s.mu.Unlock is given ctx, not the hold context .*\(s.mu.Unlock\(hctx\)\)`
	_ = hctx
	return nil
}

func unlockOtherHold(ctx context.Context, a, b *relock.Lock) {
	actx, _ := a.Lock(ctx)
	bctx, _ := b.Lock(ctx)
	b.Unlock(bctx)
	a.Unlock(bctx) // want `a.Unlock is given bctx, not the hold context .*\(a.Unlock\(actx\)\)`
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
