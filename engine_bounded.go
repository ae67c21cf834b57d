package relock

// The bounded path of an acquire: an attempt made under the caller's bound
// (its context's end, TryLock's wait), the attempt left in flight when the
// bound comes, and how the background settles it so that nothing stays held
// by an owner told "not obtained". engine.go holds the acquire itself.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// acquireBounded runs one attempt of the call, bounded by ctx and k.until:
// on the caller's goroutine where go-redis ends it by the bound
// (acquireInline), else on a worker. On overrun it records the attempt in
// flight (k.late) and returns overrun's error.
func (k *lockCall) acquireBounded(ctx, dctx context.Context, req acquireReq) (attempt, error) {
	if k.unbounded(ctx) {
		return k.t.acquireParts(dctx, req, k.parts) // no closure to allocate
	}
	until := k.until
	if !until.IsZero() {
		// The wait loop makes its last attempt when the wait ends: any
		// attempt has cleanupGrace to be answered (more when attempts end
		// by themselves later: traits.attemptBound).
		grace := max(cleanupGrace, k.t.traits().attemptBound)
		until = later(until, time.Now().Add(grace))
	}
	if bctx, ok := k.inlineContext(ctx, dctx, until); ok {
		return k.acquireInline(ctx, bctx, dctx, until, req)
	}
	a, err, late := awaitWith(k.c.workers, &acquireWaits, ctx, until, k.c.closing, func() (attempt, error) { return k.t.acquireParts(dctx, req, k.parts) })
	if late != nil {
		k.late, k.lateOp = late, req.op
		return attempt{}, k.c.overrun(ctx)
	}
	return a, err
}

// unbounded reports whether nothing can cut the call's attempts short: ctx
// never ends and the call has no wait end.
func (k *lockCall) unbounded(ctx context.Context) bool {
	return ctx.Done() == nil && k.until.IsZero()
}

// detach hands the end of the call to the background once its attempt in
// flight (k.late) has returned: then finish runs with that attempt's reply,
// and the call leaves its records (semaphores first), which lockWith
// therefore does not.
func (k *lockCall) detach(finish func(reply[attempt])) {
	k.detached = true
	late, parts, taken := k.late, k.parts, k.taken
	k.c.goSettle(func() {
		r := <-late
		finish(r)
		leave(parts, taken)
	})
}

// settleLate undoes, in the background, a new acquisition that gave up with
// an attempt in flight: once that attempt returns, a grant it obtained (or
// may have: no reply) is released, and the waiter leaves the queue.
// unknown is the op of an earlier attempt of unknown outcome, which a
// definite reply settles (see target.leftover).
func (k *lockCall) settleLate(dctx context.Context, req acquireReq, waitAs, unknown string, started time.Time) {
	op := k.lateOp
	k.detach(func(r reply[attempt]) {
		switch {
		case r.err == nil && (r.v.outcome == acquired || k.lateResent):
			// A reply to the request sent again (settleCut) leaves the
			// first one, which may still run, to be voided all the same.
			unknown = k.t.leftover(dctx, req, k.parts, op, r.v, nil)
		case r.err == nil:
			unknown = ""
		case outcomeUnknown(r.err):
			unknown = k.t.leftover(dctx, req, k.parts, op, r.v, r.err)
		}
		k.giveUp(dctx, req, waitAs, unknown, started)
	})
}

// giveUpBounded is giveUp for a call without an attempt in flight. A
// waiter's leaving the queue is a request too: the caller waits for it at
// most cleanupGrace, then the rest runs in the background, keeping the
// semaphores (see detach).
func (k *lockCall) giveUpBounded(dctx context.Context, req acquireReq, waitAs, unknown string, started time.Time) {
	if waitAs == "" { // nothing to send now: giveUp only starts background work
		k.giveUp(dctx, req, waitAs, unknown, started)
		return
	}
	_, _, late := awaitBounded(context.Background(), time.Now().Add(cleanupGrace), func() (attempt, error) {
		k.giveUp(dctx, req, waitAs, unknown, started)
		return attempt{}, nil
	})
	if late != nil {
		k.late = late
		k.detach(func(reply[attempt]) {})
	}
}

// reenterLate finishes, in the background, a re-entry whose reply had not
// come by the caller's bound: a hold found gone ends; a re-entry that did
// count in Redis only raises the count there, which the owner's last Unlock
// clears.
func (k *lockCall) reenterLate() {
	k.detach(func(r reply[attempt]) {
		if r.err == nil && r.v.outcome == mismatch {
			cause := fmt.Errorf("%w: the hold was gone when the owner re-entered", ErrLockLost)
			for _, p := range k.parts {
				p.h.client().end(p.h, p.held, cause)
			}
		}
	})
}

// reentryParent returns the parent of a re-entry's hold context (see above)
// and a func to call with the hold context once it is made, which stops the
// following when the re-entry ends.
func (k *lockCall) reentryParent() (context.Context, func(hctx context.Context)) {
	parent := k.parent
	if parent.Done() == nil {
		return parent, func(context.Context) {}
	}
	detached, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	f := &follower{k: k, cancel: cancel}
	f.watch(parent)
	return detached, func(hctx context.Context) { context.AfterFunc(hctx, f.close) }
}

// unlockedOuter returns the context an outer entry of this hold, found in
// ctx, was derived from, when ctx ended because that entry was unlocked;
// else nil.
func (k *lockCall) unlockedOuter(ctx context.Context, cause error) context.Context {
	if !errors.Is(cause, ErrUnlocked) {
		return nil
	}
	for _, p := range k.parts {
		c := p.h.client()
		e := entryFrom(ctx, c, p.h.key.id)
		if e == nil {
			continue
		}
		c.holds.mu.Lock()
		ended, parent := e.ended, e.parent
		c.holds.mu.Unlock()
		if errors.Is(ended, ErrUnlocked) && parent != nil {
			return parent
		}
	}
	return nil
}

// giveUp cleans up after a wait that ended without the lock: the waiter
// (waitAs, "" when it never queued) leaves the lock's queue, and a grant
// that may exist in Redis with nobody to use it (unknown: the op of an
// attempt whose outcome is unknown, sent at started; see target.leftover)
// is freed in the background instead of blocking others for a lease.
func (k *lockCall) giveUp(dctx context.Context, req acquireReq, waitAs, unknown string, started time.Time) {
	if waitAs != "" {
		k.queue.leave(dctx, req.owner, waitAs, k.c.leaseFor(req.lease))
	}
	if unknown != "" {
		s := k.parts[0].h.scheme // only a scheme's own record leaves an op to free
		k.c.releaseInBackground(s, releaseReq{owner: req.owner, op: k.c.newOp(), gen: unknown, final: true, void: true}, started.Add(k.c.leaseFor(req.lease)))
	}
}
