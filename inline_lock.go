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
// timeout) or it was never sent (errNotSent). A request cut short is sent
// again in the background (settleCut), and a grant that this answers
// with by the bound is the call's (awaitResend). Otherwise, as on the
// goroutine path, the caller waits for its bound, the attempt is recorded
// as one in flight at the bound (k.late) and settled in the background,
// and the call fails as an overrun.
func (k *lockCall) acquireInline(ctx, bctx, dctx context.Context, until time.Time, req acquireReq) (attempt, error) {
	k.ranRead = k.c.readTimeoutFor(bctx)
	a, err := k.t.acquireParts(bctx, req, k.parts)
	d, bounded := bctx.(*deadlineCtx)
	if bounded {
		d.release()
	}
	if ctx.Err() == nil && (err == nil || !bounded || !cutByBound(err)) {
		return a, err
	}
	if errors.Is(err, errNotSent) { // nothing to settle
		k.awaitBound(ctx, until, nil)
		return attempt{}, k.c.notSentByBound(ctx, err)
	}
	late, resent := k.settleCut(dctx, req, a, err), outcomeUnknown(err)
	if resent && ctx.Err() == nil {
		if a, ok := k.awaitResend(ctx, until, &late); ok {
			return a, nil
		}
	}
	k.late, k.lateOp, k.lateResent = late, req.op, resent
	k.awaitBound(ctx, until, nil)
	return attempt{}, k.c.overrun(ctx)
}

// awaitResend waits, at most until the call's bound, for the reply to the
// request settleCut sent again (*late) after go-redis cut the first short.
// That cut comes at a clone's read timeout (clones.go), a quarter of the
// bound at most, so a Redis that stalls longer than that but answers within
// the bound still grants the call its lock: ok, with the grant marked
// resent (its hold's final release voids the first request, which may still
// reach Redis). A reply other than a grant, or one that comes after the
// bound, is not the call's: *late is left with it, for settleLate. A
// MultiLock's parts are released by a script with no void marks
// (multi_release.lua), so its grant is not taken so either.
func (k *lockCall) awaitResend(ctx context.Context, until time.Time, late *<-chan reply[attempt]) (attempt, bool) {
	r, ok := k.awaitBound(ctx, until, *late)
	if !ok {
		return attempt{}, false
	}
	inTime := ctx.Err() == nil && (until.IsZero() || time.Now().Before(until))
	if r.err == nil && r.v.outcome == acquired && len(k.parts) == 1 && inTime {
		r.v.resent = true
		return r.v, true
	}
	answered := make(chan reply[attempt], 1)
	answered <- r
	*late = answered
	return attempt{}, false
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
// — or the Client's Close, or until answer (nil: none) has a reply, which
// it returns with ok true.
func (k *lockCall) awaitBound(ctx context.Context, until time.Time, answer <-chan reply[attempt]) (r reply[attempt], ok bool) {
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
	case r = <-answer:
		return r, true
	}
	return r, false
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
