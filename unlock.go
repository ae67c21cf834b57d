package relock

// Unlock for every lock type: unlockWith and its unlockCall, which ends
// exactly the entry of the hold context it is given.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// unlockWith is Unlock for every lock type: it ends exactly the entry of the
// hold context it is given — one per part of the target.
func unlockWith(ctx context.Context, t target) error {
	n := t.partCount()
	for i := range n {
		if c := t.record(i).client(); c == nil {
			return errNilClient
		} else if c.err != nil {
			return c.err
		}
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	o := ownerFrom(ctx)
	if o == nil {
		return errNoOwner("Lock")
	}
	// Twice the room: releaseBounded's copy of the parts lives in the
	// second half, with no allocation of its own. k is on the heap anyway
	// (the background finishes an overrun Unlock with it), so one part and
	// its copy live in k.
	k := &unlockCall{t: t, c: t.client()}
	if n == 1 {
		k.parts = k.onePart[:1]
	} else {
		k.parts = make([]unlockPart, n, 2*n)
	}
	for i := range n {
		r := t.record(i)
		e := entryFrom(ctx, r.client(), r.holdID())
		if e == nil || e.h.key.owner != o.field(r.client()) {
			return fmt.Errorf("%w: the context is not a hold context of this lock; pass the context Lock returned", ErrNotHeld)
		}
		k.parts[i].e = e
	}
	// Counted as a user only once every record is found: an early return
	// above must leave no record pinned.
	for _, p := range k.parts {
		p.e.h.client().holds.use(p.e.h)
	}
	// An Unlock must run, so it never gives up; but its caller waits no
	// longer than the unlock timeout, for the semaphores or the release.
	taken, err := serialiseBy(context.Background(), k.parts, time.Now().Add(k.c.opts.unlockTimeout))
	if err != nil {
		return k.unlockLater(ctx, taken)
	}
	return k.finish(ctx, taken)
}

// finish is the rest of an Unlock once it holds the records' semaphores
// (taken of them): release, report, settle, leave.
func (k *unlockCall) finish(ctx context.Context, taken int) error {
	fails, live := k.prepare()
	if live == 0 && len(fails) == 0 {
		leave(k.parts, taken)
		if k.releasedByClose() {
			return nil
		}
		return ErrNotHeld
	}
	var late <-chan reply[struct{}]
	var lateParts []unlockPart
	if live > 0 {
		late, lateParts = k.releaseBounded(ctx)
		k.report(ctx)
		fails = append(fails, k.settle()...)
	}
	switch {
	case late != nil:
		k.finishLate(late, lateParts, taken)
	case k.cut:
		k.retryThenLeave(taken)
	default:
		leave(k.parts, taken)
	}
	if len(fails) == 0 {
		return nil
	}
	return k.t.unlockError(k.parts, fails)
}

// An unlockCall is one Unlock in the engine.
type unlockCall struct {
	t     target
	c     *Client // t.client(): where the call is reported
	parts []unlockPart
	cut   bool // some part's inline release was cut short (see inline.go)
	// onePart holds parts and releaseBounded's copy for an Unlock of one
	// part (all but a MultiLock's): see unlockWith.
	onePart [2]unlockPart
}

// releasedByClose reports whether Close released every part's hold: the
// Unlock the caller defers after it has nothing left to do.
func (k *unlockCall) releasedByClose() bool {
	for _, p := range k.parts {
		r := &p.e.h.client().holds
		r.mu.Lock()
		ended := p.e.ended
		r.mu.Unlock()
		if !releasedByClose(ended) {
			return false
		}
	}
	return true
}

// prepare marks the parts whose entry is live and sets their requests. An
// entry that ended already is left alone; it adds a failure if it was lost.
func (k *unlockCall) prepare() (fails []partFailure, live int) {
	for i := range k.parts {
		p := &k.parts[i]
		h := p.e.h
		r := &h.client().holds
		r.mu.Lock()
		if cause := p.e.ended; cause != nil {
			r.mu.Unlock()
			if lost(cause) {
				fails = append(fails, partFailure{i, cause})
			}
			continue
		}
		p.live = true
		p.req = releaseReq{owner: h.key.owner, gen: p.e.gen, final: h.entries != nil && h.entries.next == nil}
		if p.req.final {
			p.req.ahead, p.req.void = h.next(), h.void
		}
		h.releasing = p.req.final
		p.until, p.since = h.expiresAt.time(), h.since.time()
		p.req.until = p.until
		r.mu.Unlock()
		live++
	}
	return fails, live
}

// report tells the Observer how the release went: one event per live part
// (on its own Client), as reportAcquired.
func (k *unlockCall) report(ctx context.Context) {
	for _, p := range k.parts {
		h := p.e.h
		switch {
		case !p.live:
		case p.err != nil:
			h.client().emitReleased(ctx, h, p.since, p.req.final, p.err)
		case p.out != notHeld:
			h.client().emitReleased(ctx, h, p.since, p.out == released, nil)
		}
	}
}

// settle ends the live parts' entries as their releases tell, and returns
// the parts' failures.
func (k *unlockCall) settle() []partFailure {
	var fails []partFailure
	for i := range k.parts {
		p := &k.parts[i]
		if !p.live {
			continue
		}
		h := p.e.h
		c := h.client()
		switch {
		case p.err == errUnlockTimeout:
			// Retried once the release in flight returns (finishLate).
			c.unlockFailed(p.e, p.req, p.until, false)
			fails = append(fails, partFailure{i, c.notConfirmed(nil)})
		case p.cut:
			// Retried, keeping the semaphores (retryThenLeave).
			c.unlockFailed(p.e, p.req, p.until, false)
			fails = append(fails, partFailure{i, c.notConfirmed(cutCause(p.err))})
		case p.err != nil:
			c.unlockFailed(p.e, p.req, p.until, true)
			fails = append(fails, partFailure{i, c.notConfirmed(p.err)})
		case p.out == released:
			c.end(h, p.req.gen, ErrUnlocked)
		case p.out == stillHeld:
			c.holds.mu.Lock()
			c.endEntryLocked(p.e, ErrUnlocked)
			c.holds.mu.Unlock()
		default:
			cause := fmt.Errorf("%w: the hold was gone when Unlock ran", ErrLockLost)
			c.end(h, p.req.gen, cause)
			fails = append(fails, partFailure{i, cause})
		}
	}
	return fails
}

// releaseBounded runs the release of the live parts, bounded by the
// Client's unlock timeout: inline when go-redis ends it by that bound
// itself, on the client or a clone of it (see inline.go), else on a
// goroutine of its own. The call in flight then
// works on its own copy of the parts. On overrun each live part's error is errUnlockTimeout, and the
// returned channel (else nil) gets a reply when the release in flight has
// returned; late then holds its outcome per part, to finish with in the
// background.
func (k *unlockCall) releaseBounded(ctx context.Context) (done <-chan reply[struct{}], late []unlockPart) {
	dctx := detached(ctx)
	until := time.Now().Add(k.c.opts.unlockTimeout)
	if slack, ok := k.inline(); ok {
		k.releaseInline(dctx, until, slack)
		return nil, nil
	}
	// The copy goes in the room unlockWith left; the call in flight
	// captures t, not k, which would keep the unlockCall on the heap.
	parts := append(k.parts[len(k.parts):], k.parts...)
	t := k.t
	_, _, ch := awaitWith(k.c.workers, &releaseWaits, context.Background(), until, nil, func() (struct{}, error) {
		t.releaseParts(dctx, parts)
		return struct{}{}, nil
	})
	if ch == nil {
		copy(k.parts, parts)
		return nil, nil
	}
	for i := range k.parts {
		if k.parts[i].live {
			k.parts[i].err = errUnlockTimeout
		}
	}
	return ch, parts
}

// finishLate runs, in the background, once a release that overran the
// unlock timeout has returned: a final release that failed is retried until
// its lease ends (unlockFailed did not start that, so that no retry races
// the release in flight). Then the call leaves its records.
func (k *unlockCall) finishLate(done <-chan reply[struct{}], late []unlockPart, taken int) {
	parts := k.parts
	k.c.goSettle(func() {
		<-done
		for i, p := range late {
			if parts[i].live && p.err != nil && p.req.final {
				h := p.e.h
				h.client().releaseInBackground(h.scheme, p.req, parts[i].until)
			}
		}
		leave(parts, taken)
	})
}

// unlockLater is Unlock when the records' semaphores stay taken past the
// unlock timeout by an earlier request of the owner still in flight: the
// whole Unlock runs in the background, in order behind it, and the caller
// is told it is not confirmed.
func (k *unlockCall) unlockLater(ctx context.Context, taken int) error {
	k.c.goSettle(func() {
		n, _ := serialise(context.Background(), k.parts[taken:])
		k.finish(ctx, taken+n)
	})
	return k.c.notConfirmed(nil)
}

// inline reports whether the Unlock's release can run on the caller's
// goroutine, and the slack its context ends by before the unlock bound
// (see clones.go): go-redis ends every part's request by the bound, on the
// part's client or a clone of it, and the scheme sends nothing through
// other Clients (a RedLock fans out on goroutines anyway, bounded by its
// node timeout, not by the unlock timeout).
func (k *unlockCall) inline() (slack time.Duration, ok bool) {
	if k.t.traits().otherClients {
		return 0, false
	}
	return k.slackWithin(k.c.opts.unlockTimeout)
}

// slackWithin is the slack a request of every part needs with left to the
// bound, and whether each part's client can end one by then.
func (k *unlockCall) slackWithin(left time.Duration) (slack time.Duration, ok bool) {
	for i := range k.parts {
		s, fits := k.parts[i].e.h.client().slackNeeded(left)
		if !fits {
			return 0, false
		}
		slack = max(slack, s)
	}
	return slack, true
}

// releaseInline runs the release of the live parts on the caller's
// goroutine, until the unlock bound at the latest, and marks the parts
// whose release was cut short (see inline.go). The context ends slack
// before the bound, so that a request begun by then is over by the bound.
func (k *unlockCall) releaseInline(dctx context.Context, until time.Time, slack time.Duration) {
	bctx := newBoundedCtx(dctx, until.Add(-slack), slack)
	k.t.releaseParts(bctx, k.parts)
	bctx.release()
	k.markCut()
	if k.cut {
		k.resendCut(dctx, until)
	}
}

// markCut marks the live parts whose release was cut short: its outcome is
// unknown, or it was not sent.
func (k *unlockCall) markCut() {
	k.cut = false
	for i := range k.parts {
		p := &k.parts[i]
		p.cut = p.live && p.err != nil && (outcomeUnknown(p.err) || errors.Is(p.err, errNotSent))
		k.cut = k.cut || p.cut
	}
}

// resendCut sends each release cut short again, the same request (its
// replay is recognised, so a first one that still runs releases nothing
// twice), for as long as the unlock bound leaves room for one more inline
// request: each runs with the slack of what is left (clones.go), so the
// Unlock waits for Redis until less than twice the smallest slack (100
// ms) is left of its bound, as one that waits for its reply on a goroutine
// waits to the bound, before it reports the release unconfirmed; on a
// client that ends requests at their deadline, until the bound. A failure
// that returns at once is followed by a pause (faultBackoff), cut at the
// round's deadline.
func (k *unlockCall) resendCut(dctx context.Context, until time.Time) {
	for n := 1; k.cut; n++ {
		left := time.Until(until)
		slack, ok := k.slackWithin(left)
		if !ok || left-slack < time.Millisecond {
			return
		}
		for i := range k.parts {
			if p := &k.parts[i]; p.cut {
				bctx := newBoundedCtx(dctx, until.Add(-slack), slack)
				p.out, p.err = p.e.h.scheme.release(bctx, p.req)
				bctx.release()
			}
		}
		k.markCut()
		if pause := min(faultBackoff(n), time.Until(until.Add(-slack))); k.cut && pause > 0 {
			select {
			case <-k.c.closing:
				return
			case <-time.After(pause):
			}
		}
	}
}

// retryThenLeave retries, in the background, the final releases cut short
// (the same requests: a replay is recognised) until Redis answers them or
// their leases run out, then leaves the records: their semaphores are kept
// until then (see the top of this file).
func (k *unlockCall) retryThenLeave(taken int) {
	parts := k.parts
	k.c.goSettle(func() {
		for _, p := range parts {
			if p.cut && p.req.final {
				h := p.e.h
				h.client().retryUntil(releaseOp(h.scheme, p.req), p.until)
			}
		}
		leave(parts, taken)
	})
}

// errNoOwner is the ErrNotHeld of every call that needs the caller's hold
// (Unlock, Release, Token, Validity) given a context that carries no owner:
// the usual mistake is passing the context the hold was taken with rather
// than the one the acquire (named by acquire) returned, so it says so.
func errNoOwner(acquire string) error {
	return fmt.Errorf("%w: the context carries no owner; pass the context %s returned", ErrNotHeld, acquire)
}
