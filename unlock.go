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
// hold context it is given — one per record for a partedScheme.
func unlockWith(ctx context.Context, s scheme) error {
	recs := records(s)
	for _, r := range recs {
		if c := r.client(); c == nil {
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
		return fmt.Errorf("%w: the context carries no owner; pass the context Lock returned", ErrNotHeld)
	}
	k := unlockCall{s: s, c: s.client(), parted: isParted(s), parts: make([]part, len(recs))}
	for i, r := range recs {
		e := entryFrom(ctx, r.client(), r.holdID())
		if e == nil || e.h.key.owner != o.field(r.client()) {
			return fmt.Errorf("%w: the context is not a hold context of this lock; pass the context Lock returned", ErrNotHeld)
		}
		k.parts[i].e, k.parts[i].h = e, e.h
	}
	// Counted as a user only once every record is found: an early return
	// above must leave no record pinned.
	for _, p := range k.parts {
		p.h.client().holds.use(p.h)
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
	errs, live := k.prepare()
	if live == 0 && len(errs) == 0 {
		leave(k.parts, taken)
		return ErrNotHeld
	}
	var late <-chan reply[struct{}]
	var lateParts []part
	if live > 0 {
		late, lateParts = k.releaseBounded(ctx)
		k.report(ctx)
		errs = append(errs, k.settle()...)
	}
	if late != nil {
		k.finishLate(late, lateParts, taken)
	} else {
		leave(k.parts, taken)
	}
	return k.result(errs)
}

// An unlockCall is one Unlock in the engine.
type unlockCall struct {
	s      scheme
	c      *Client // s.client(): where the call is reported
	parted bool    // s is a partedScheme
	parts  []part
}

// prepare marks the parts whose entry is live and sets their requests. An
// entry that ended already is left alone; it adds an error if it was lost.
func (k *unlockCall) prepare() (errs []error, live int) {
	for i := range k.parts {
		p := &k.parts[i]
		r := &p.h.client().holds
		r.mu.Lock()
		if cause := p.e.ended; cause != nil {
			r.mu.Unlock()
			if lost(cause) {
				errs = append(errs, k.partErr(p, cause))
			}
			continue
		}
		p.live = true
		p.req = releaseReq{owner: p.h.key.owner, gen: p.e.gen, final: len(p.h.entries) == 1}
		p.h.releasing = p.req.final
		p.until, p.since = p.h.expiresAt, p.h.since
		p.req.until = p.until
		r.mu.Unlock()
		live++
	}
	return errs, live
}

// report tells the Observer how the release went: one event per live part
// (on its own Client), as reportAcquired.
func (k *unlockCall) report(ctx context.Context) {
	for _, p := range k.parts {
		switch {
		case !p.live:
		case p.err != nil:
			p.h.client().emitReleased(ctx, p.h, p.since, p.req.final, p.err)
		case p.out != notHeld:
			p.h.client().emitReleased(ctx, p.h, p.since, p.out == released, nil)
		}
	}
}

// settle ends the live parts' entries as their releases tell, and returns
// the parts' failures.
func (k *unlockCall) settle() []error {
	var errs []error
	for i := range k.parts {
		p := &k.parts[i]
		if !p.live {
			continue
		}
		c := p.h.client()
		switch {
		case p.err == errUnlockTimeout:
			// Retried once the release in flight returns (finishLate).
			c.unlockFailed(p.e, p.req, p.until, false)
			errs = append(errs, k.partErr(p, c.notConfirmed(nil)))
		case p.err != nil:
			c.unlockFailed(p.e, p.req, p.until, true)
			errs = append(errs, k.partErr(p, c.notConfirmed(p.err)))
		case p.out == released:
			c.end(p.h, p.req.gen, ErrUnlocked)
		case p.out == stillHeld:
			c.holds.mu.Lock()
			c.endEntryLocked(p.e, ErrUnlocked)
			c.holds.mu.Unlock()
		default:
			cause := fmt.Errorf("%w: the hold was gone when Unlock ran", ErrLockLost)
			c.end(p.h, p.req.gen, cause)
			errs = append(errs, k.partErr(p, cause))
		}
	}
	return errs
}

// partErr names the part err is about, for a partedScheme.
func (k *unlockCall) partErr(p *part, err error) error {
	if !k.parted {
		return err
	}
	return fmt.Errorf("%s part %q: %w", k.s.info().Kind, p.h.scheme.info().Name, err)
}

// result is the error Unlock returns for the parts' failures: a
// partedScheme's joined (errors.Join), another's as it is (it has one part).
func (k *unlockCall) result(errs []error) error {
	if k.parted || len(errs) != 1 {
		return errors.Join(errs...)
	}
	return errs[0]
}
