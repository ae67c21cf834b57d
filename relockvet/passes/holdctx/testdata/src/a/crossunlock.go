package a

import (
	"context"

	"github.com/relock-go/relock"
)

// Check 5: an Unlock given the hold of another lock.

func crossUnlock(ctx context.Context, a, b *relock.Lock) error {
	actx, err := a.Lock(ctx)
	if err != nil {
		return err
	}
	defer a.Unlock(actx)
	bctx, err := b.Lock(ctx)
	if err != nil {
		return err
	}
	defer b.Unlock(actx) // want `b.Unlock is given actx, a hold context of a \(from a.Lock\), not of b: it does not release b's hold; pass b's own hold context \(bctx\) to b.Unlock`
	return work(bctx)
}

func crossUnlockDerived(ctx context.Context, r *relock.ReadLock, w *relock.FairLock) {
	rctx, _ := r.Lock(ctx)
	wctx, _ := w.Lock(ctx)
	c := rctx
	w.Unlock(c) // want `w.Unlock is given c, a hold context of r \(from r.Lock\), not of w`
	r.Unlock(rctx)
	_ = wctx
}

// Not reported.

func ownUnlocks(ctx context.Context, a, b *relock.Lock) {
	actx, _ := a.Lock(ctx)
	bctx, _ := b.Lock(actx) // nested: bctx derives from actx
	b.Unlock(bctx)
	a.Unlock(actx)
}

func unlockThroughNested(ctx context.Context, a, b *relock.Lock) {
	actx, _ := a.Lock(ctx)
	bctx, _ := b.Lock(actx)
	a.Unlock(bctx) // bctx carries actx's hold of a
	b.Unlock(bctx)
}

func unlockCallersHold(ctx context.Context, a, b *relock.Lock) {
	actx, _ := a.Lock(ctx)
	b.Unlock(actx) // b is not taken here: ctx may hold it, and actx carries that
	a.Unlock(actx)
}
