package relock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The caller's deadline is the bound (see "Failure and cancellation" in the
// package doc). A script runs detached from the caller's context — a request
// cancelled in flight may still run in Redis, and a hold nobody knows of
// would leak — but the caller does not wait for it past its bound: the
// request goes on in a goroutine, the caller returns, and the engine
// reconciles the request in the background once it has returned. The
// reconciliation keeps the hold record's semaphore (hold.sem) until then, so
// the owner's next request on the lock cannot overtake the one in flight,
// and a clean-up never races the request it cleans up after on another
// connection (a release that reached Redis before a delayed acquire would
// find nothing, and the acquire would then leak a hold).

// defaultUnlockTimeout is how long Unlock waits for Redis by default (see
// WithUnlockTimeout).
const defaultUnlockTimeout = time.Second

// cleanupGrace is how long a failed Lock waits, past its bound, for its
// clean-up (a waiter leaving a FairLock's or RWLock's queue) while Redis
// answers, and how long TryLock's last attempt, made when its wait ends, may
// take; an unanswered clean-up goes on in the background. It is the
// documented slack of Lock's bound.
const cleanupGrace = 50 * time.Millisecond

// reply is what a detached call returned.
type reply[T any] struct {
	v   T
	err error
}

// awaitBounded runs call and waits for it until ctx ends or until (zero: no
// such bound), whichever is first. call must not depend on ctx: it runs
// detached. When the bound comes first it returns ok false and late, on
// which the call's reply arrives when it returns. A call that can never be
// cut short (no bound) runs on the caller's goroutine, costing nothing.
func awaitBounded[T any](ctx context.Context, until time.Time, call func() (T, error)) (v T, err error, late <-chan reply[T]) {
	return awaitWith(nil, nil, ctx, until, nil, call)
}

// A boundedWait is what a bounded call is waited on with: the channel of
// its reply and the timer of its bound. The calls made per Lock (with a
// deadline) and per Unlock take theirs from a pool (acquireWaits,
// releaseWaits): allocating both would be three allocations a call.
type boundedWait[T any] struct {
	ch    chan reply[T]
	timer *time.Timer
}

var acquireWaits, releaseWaits sync.Pool

// awaitWith is awaitBounded with its boundedWait from pool (nil: a new
// one), running call on one of ws (nil: a goroutine of its own), and
// ending the wait as its bound does when stop is closed (nil: never; a
// Lock's is its Client's Close, see Client.calls). A wait goes back to the
// pool only once its reply has been received and its timer stopped; a
// late one is never reused.
func awaitWith[T any](ws *workers, pool *sync.Pool, ctx context.Context, until time.Time, stop <-chan struct{}, call func() (T, error)) (v T, err error, late <-chan reply[T]) {
	if ctx.Done() == nil && until.IsZero() {
		v, err = call()
		return v, err, nil
	}
	w := newBoundedWait[T](pool)
	switch pool {
	case &releaseWaits:
		releaseGoroutines.Add(1)
	case &acquireWaits:
		acquireGoroutines.Add(1)
	}
	ws.run(func() {
		v, err := call()
		w.ch <- reply[T]{v, err}
	})
	var timeout <-chan time.Time
	if d, ok := ctx.Deadline(); !until.IsZero() && (!ok || until.Before(d)) {
		timeout = w.arm(time.Until(until))
	}
	select {
	case r := <-w.ch:
		w.done(pool)
		return r.v, r.err, nil
	case <-ctx.Done():
	case <-timeout:
	case <-stop:
	}
	select { // a reply that came with the bound still counts
	case r := <-w.ch:
		w.done(pool)
		return r.v, r.err, nil
	default:
		if w.timer != nil {
			w.timer.Stop()
		}
		return v, nil, w.ch
	}
}

func newBoundedWait[T any](pool *sync.Pool) *boundedWait[T] {
	if pool != nil {
		if w, ok := pool.Get().(*boundedWait[T]); ok {
			return w
		}
	}
	return &boundedWait[T]{ch: make(chan reply[T], 1)}
}

// arm starts the wait's timer for d and returns its channel.
func (w *boundedWait[T]) arm(d time.Duration) <-chan time.Time {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d) // stopped by done: no stale tick (Go 1.23 timers)
	}
	return w.timer.C
}

// done stops the wait's timer, its reply received, and gives the wait back
// to pool.
func (w *boundedWait[T]) done(pool *sync.Pool) {
	if w.timer != nil {
		w.timer.Stop()
	}
	if pool != nil {
		pool.Put(w)
	}
}

// overrun is the error of a Lock whose request was still in flight when its
// bound came: not obtained, because of the context (its cause) or the end of
// TryLock's wait, and Redis was the reason.
func (c *Client) overrun(ctx context.Context) error {
	why := c.unanswered("the request may still run; it is undone in the background")
	if c.closed.Load() {
		return fmt.Errorf("%w: %w: %w", ErrNotObtained, ErrClientClosed, why)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w: %w", ErrNotObtained, context.Cause(ctx), why)
	}
	return fmt.Errorf("%w: the wait ended: %w", ErrNotObtained, why)
}

// detached is ctx without its cancellation and deadline, for a request
// that runs detached from its caller (see above): ctx itself when it has
// neither (context.Background, a hold context's usual root), which spares
// an allocation per request.
func detached(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); !ok && ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// waitEnd is when a TryLock waiting wait that starts now ends, as a bound
// on its requests: zero for none (one attempt, or WaitForever), in which
// case only its context bounds it.
func waitEnd(wait time.Duration) time.Time {
	if wait == 0 || wait == WaitForever {
		return time.Time{}
	}
	return time.Now().Add(wait)
}

// serialiseBy takes the parts' semaphores as serialise does, giving up when
// ctx ends or until passes (zero: never). The caller calls leave either way.
func serialiseBy[P part](ctx context.Context, parts []P, until time.Time) (int, error) {
	for i, p := range parts {
		sem := p.hold().sem
		select {
		case sem <- struct{}{}: // the common case: free, no timer
			continue
		default:
		}
		if until.IsZero() {
			if taken, err := serialise(ctx, parts[i:]); err != nil {
				return i + taken, err
			}
			return len(parts), nil
		}
		t := time.NewTimer(time.Until(until))
		select {
		case sem <- struct{}{}:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return i, notObtained(ctx)
		case <-t.C:
			return i, fmt.Errorf("%w: the wait ended while an earlier request of this owner on the lock was in flight", ErrNotObtained)
		}
	}
	return len(parts), nil
}

// notConfirmed is Unlock's error for a release Redis did not confirm: err
// is why (nil: the unlock timeout passed first).
func (c *Client) notConfirmed(err error) error {
	if err == nil {
		return fmt.Errorf("%w: %w: no reply within %v; retrying in the background until the lease ends", ErrNotConfirmed, ErrUnavailable, c.opts.unlockTimeout)
	}
	return fmt.Errorf("%w: retrying in the background until the lease ends: %w", ErrNotConfirmed, unavailableOr(err))
}

// unavailableOr marks err as ErrUnavailable unless it says so already or
// is a Redis error reply.
func unavailableOr(err error) error {
	if errors.Is(err, ErrUnavailable) || !transient(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// errUnlockTimeout marks a part whose release had no reply within the unlock
// timeout (see settle).
var errUnlockTimeout = errors.New("relock: no reply within the unlock timeout")

// queryBounded runs a read-only request and waits for it until ctx ends
// (go-redis does not stop a read when a context ends): a query has nothing
// to undo, so one cut short is simply left to finish.
func queryBounded[T any](c *Client, ctx context.Context, what string, call func() (T, error)) (T, error) {
	return bounded(c, ctx, what, "", call)
}

// changeBounded is queryBounded for a request that changes Redis and needs
// no undoing (a replay-safe latch call): call must run detached from ctx;
// one cut short goes on, and its error says it may still apply.
func changeBounded[T any](c *Client, ctx context.Context, what string, call func() (T, error)) (T, error) {
	return bounded(c, ctx, what, "the request may still apply", call)
}

func bounded[T any](c *Client, ctx context.Context, what, mayRun string, call func() (T, error)) (T, error) {
	v, err, late := awaitBounded(ctx, time.Time{}, call)
	if late != nil {
		return v, fmt.Errorf("relock: %s: %w: %w", what, context.Cause(ctx), c.unanswered(mayRun))
	}
	return v, err
}
