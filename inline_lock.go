package relock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A Lock's attempt on the caller's goroutine (see inline.go).

// inlineContext returns the context a bounded attempt of the call — bound
// by ctx and by until (zero: none) — runs under on the caller's goroutine,
// derived from dctx, or ok false when go-redis cannot end its requests by
// the bound (the attempt then runs on a goroutine: acquireBounded). With
// no bound but a context that can be cancelled, the attempt runs under
// dctx, go-redis's own timeouts ending it.
func (k *lockCall) inlineContext(ctx, dctx context.Context, until time.Time) (bctx context.Context, ok bool) {
	if k.t.traits().otherClients {
		return nil, false
	}
	bound, hasBound := ctx.Deadline()
	if !until.IsZero() && (!hasBound || until.Before(bound)) {
		bound, hasBound = until, true
	}
	if !hasBound {
		for i := range k.parts {
			if !k.parts[i].h.client().clones.timed {
				return nil, false
			}
		}
		return dctx, true
	}
	left := time.Until(bound)
	var slack time.Duration
	for i := range k.parts {
		s, fits := k.parts[i].h.client().slackNeeded(left)
		if !fits {
			return nil, false
		}
		slack = max(slack, s)
	}
	return newBoundedCtx(dctx, bound.Add(-slack), slack), true
}

// acquireInline runs the attempt req under bctx (inlineContext) on the
// caller's goroutine. Its reply is not used when the caller's context ended
// meanwhile, or when go-redis cut it short by the time bctx gives it (a
// timeout) or it was never sent (errNotSent): as on the goroutine path,
// the caller then waits for its bound, the attempt is recorded as one in
// flight at the bound (k.late) and settled in the background (settleCut),
// and the call fails as an overrun.
func (k *lockCall) acquireInline(ctx, bctx, dctx context.Context, until time.Time, req acquireReq) (attempt, error) {
	a, err := k.t.acquireParts(bctx, req, k.parts)
	d, bounded := bctx.(*deadlineCtx)
	if bounded {
		d.release()
	}
	if ctx.Err() == nil && (err == nil || !bounded || !cutByBound(err)) {
		return a, err
	}
	if errors.Is(err, errNotSent) { // nothing to settle
		k.awaitBound(ctx, until)
		return attempt{}, k.c.notSentByBound(ctx, err)
	}
	k.late, k.lateOp, k.lateResent = k.settleCut(dctx, req, a, err), req.op, outcomeUnknown(err)
	k.awaitBound(ctx, until)
	return attempt{}, k.c.overrun(ctx)
}

// cutByBound reports whether err is that of a request go-redis or the
// coalescer cut short by its context's deadline or its timeouts, or did not
// send by it.
func cutByBound(err error) bool {
	return errors.Is(err, errNotSent) || (outcomeUnknown(err) && cutCause(err) == nil)
}

// notSentByBound is the error of a Lock whose attempt was not sent by its
// bound (err).
func (c *Client) notSentByBound(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w: %w", ErrNotObtained, context.Cause(ctx), err)
	}
	return fmt.Errorf("%w: the wait ended: %w", ErrNotObtained, err)
}

// awaitBound waits until the call's bound — ctx's end, until (zero: none)
// — or the Client's Close.
func (k *lockCall) awaitBound(ctx context.Context, until time.Time) {
	var timeout <-chan time.Time
	if d, ok := ctx.Deadline(); !until.IsZero() && (!ok || until.Before(d)) {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
	case <-timeout:
	case <-k.c.closing:
	}
}

// settleCut returns the reply of an attempt whose reply the call does not
// use: a, err themselves when they are definite; else that of the same
// request sent again in the background (the same op id: the scripts answer
// it as a replay of the first, whose outcome is unknown), so that what
// either took is known and can be released (settleLate, reenterLate).
func (k *lockCall) settleCut(dctx context.Context, req acquireReq, a attempt, err error) <-chan reply[attempt] {
	ch := make(chan reply[attempt], 1)
	if !outcomeUnknown(err) {
		ch <- reply[attempt]{a, err}
		return ch
	}
	t, parts := k.t, k.parts
	k.c.goSettle(func() {
		a, err := t.acquireParts(dctx, req, parts)
		ch <- reply[attempt]{a, err}
	})
	return ch
}
