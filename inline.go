package relock

// Unlock's release on the caller's goroutine.
//
// Unlock is always bounded (WithUnlockTimeout). By default go-redis ignores
// a context's deadline, so relock bounds a release by running it on a
// goroutine of its own and waiting for it at most the unlock timeout
// (bounded.go). Handing the call to another goroutine wakes a second P: on
// a small machine, where redis-server competes for the cores, that cost an
// uncontended Lock+Unlock ~20-30% (BenchmarkUncontendedParts/client 155-173
// µs/op against 112-134 inline, on 2 cores).
//
// A go-redis client made with ContextTimeoutEnabled bounds the pool wait,
// the dial, the write and the read by the context's deadline itself
// (honoursDeadlines). Unlock then runs its release on the caller's
// goroutine, under a context whose deadline is the unlock bound, derived
// from the caller's (detached) context so that its values reach hooks. A
// release cut short there — the deadline passed, a network error: its
// outcome is unknown, it may still run in Redis — is settled as one that
// overran the bound on the other path: the caller is told ErrNotConfirmed
// (ErrUnavailable) and the same request, with the same op id, is retried in
// the background (the release scripts recognise a replay by op id and the
// tail's latch). The hold records' semaphores stay taken until that retry
// is done, so the owner's next request on the lock is sent only once its
// release has been settled in Redis (it cannot, say, take its own stale
// hold over ahead of the waiters the release hands the lock to).
//
// Lock keeps its detached request (bounded.go): an acquire cut short by
// go-redis may still run in Redis later and leave a hold that nobody knows
// of, so its caller stops waiting but the request is never abandoned.

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// releaseGoroutines counts the releases Unlock ran on a goroutine of its
// own (awaitWith on releaseWaits): what the inline path saves, and what its
// tests check.
var releaseGoroutines atomic.Uint64

// A deadlineCtx is a context that ends only at its deadline: an inline
// release's. The coalescer queues calls with such a context (a call whose
// context can end otherwise runs alone: see Client.eval).
//
// It is relock's own rather than context.WithDeadline's: that one, boxed,
// costs five allocations per Unlock. It is not pooled, though a pool would
// save two more: go-redis hooks (tracing) may keep a command's context past the
// call, and a reused one would hand them another call's values and
// deadline.
type deadlineCtx struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{} // closed at the deadline
	released chan struct{} // closed when the call is done (release)
	timer    *time.Timer
}

// newDeadlineCtx returns a context that carries parent's values and ends
// at deadline; the caller calls release once done with it.
func newDeadlineCtx(parent context.Context, deadline time.Time) *deadlineCtx {
	done := make(chan struct{})
	d := &deadlineCtx{parent: parent, deadline: deadline, done: done, released: make(chan struct{})}
	d.timer = time.AfterFunc(time.Until(deadline), func() { close(done) })
	return d
}

// release stops d's timer, its call done. d does not end then, unlike a
// context.WithDeadline at its cancel: go-redis may keep using a call's
// context past the call (a dial it started for the pool finishes under
// it), and ending d early would fail other callers' requests with its
// error; the bound needs d to end at its deadline only.
func (d *deadlineCtx) release() {
	d.timer.Stop()
	close(d.released)
}

func (d *deadlineCtx) Deadline() (time.Time, bool) { return d.deadline, true }
func (d *deadlineCtx) Done() <-chan struct{}       { return d.done }
func (d *deadlineCtx) Value(key any) any           { return d.parent.Value(key) }

// AfterFunc makes a context derived from d (context.WithTimeout in
// go-redis's dial, say) watch d by a timer of its own, stopped when that
// context is cancelled, rather than by a goroutine that could outlive the
// call (see context.AfterFunc). d ends at its deadline and nothing else,
// so a timer to it is the same; f waits for d's own timer to have ended d
// (the two fire in either order), and is not called when d was released
// first (d never ends then).
func (d *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	done, released := d.done, d.released
	return time.AfterFunc(time.Until(d.deadline), func() {
		select {
		case <-done:
			f()
		case <-released:
		}
	}).Stop
}

func (d *deadlineCtx) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// cutCause is why an inline release was cut short, as notConfirmed takes
// it: nil when the unlock bound passed (the same words as an overrun on the
// other path), else the error (a network error).
func cutCause(err error) error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return nil
	}
	return err
}
