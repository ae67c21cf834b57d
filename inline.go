package relock

// Lock and Unlock on the caller's goroutine.
//
// Handing a call to another goroutine and its reply back wakes a second P
// each way: on a small machine, where redis-server competes for the cores,
// that cost an uncontended Lock+Unlock 20-25% of its time and a third of
// the Client's CPU (BENCHMARKS.md). So a bounded call — a Lock whose
// context can end or whose wait ends (TryLock), an Unlock (always bounded
// by WithUnlockTimeout) — runs its requests on the caller's goroutine
// whenever go-redis's own bounds end them by the call's bound:
//
//   - A go-redis client made with ContextTimeoutEnabled bounds the pool
//     wait, the dial, the write and the read by the context's deadline
//     itself (honoursDeadlines). The call runs under a context whose
//     deadline is its bound.
//   - Without it, go-redis still stops its pool wait, its dial and its
//     retries at the context's deadline, but a write and a read it has
//     begun run to their own timeouts (pastDeadline: WriteTimeout +
//     ReadTimeout). The call runs under a context that ends that much (its
//     slack) before the bound, so that a request begun by then is over by
//     the bound, when that leaves at least half the bound to send the
//     request in; else, on a *redis.Client (plain or failover, go-redis's
//     default timeouts among them), on a clone of it whose timeouts fit,
//     made by New with the client's hooks (clones.go).
//   - A Cluster or Ring client whose timeouts do not fit (go-redis's
//     defaults, 3 s each) and a client relock does not know (a wrapper)
//     keep the call on a goroutine of relock's, the caller waiting for it
//     at most its bound (bounded.go).
//   - A Lock whose context can be cancelled but has no deadline runs its
//     request under go-redis's own timeouts: the cancellation takes effect
//     when Redis answers, or when those timeouts end the request (a
//     wrapper keeps the goroutine).
//
// The context is derived from the caller's (detached) context so that its
// values reach hooks. A release cut short — the deadline passed, a network
// error: its outcome is unknown, it may still run in Redis — is settled as
// one that overran the bound on the other path: the caller is told
// ErrNotConfirmed (ErrUnavailable) and the same request, with the same op
// id, is retried in the background (the release scripts recognise a replay
// by op id and the tail's latch). The hold records' semaphores stay taken
// until that retry is done, so the owner's next request on the lock is sent
// only once its release has been settled in Redis (it cannot, say, take its
// own stale hold over ahead of the waiters the release hands the lock to).
//
// An acquire cut short by the call's bound — or whose caller's context
// ended while it ran — may have taken the lock in Redis with nobody to use
// it. In the background the same request, with the same op id, is sent
// again (the scripts answer it as a replay: the grant the first one made,
// or one of its own). A request cut short by a clone's read timeout (a
// quarter of the bound at most), not by the bound itself, leaves the call
// time: a grant that answers the request sent again by the bound is the
// call's (lockCall.awaitResend), and its hold's final release voids the
// first copy, which may still reach Redis. Otherwise the caller returns
// ErrNotObtained at its bound, and what the request took is released, as
// for an attempt that overran its bound on the goroutine path
// (lockCall.settleLate). The records' semaphores stay taken until then,
// and Close waits for it within its bound (calls.go).
//
// The limit, without ContextTimeoutEnabled: a connection that go-redis
// opens for a call, or a Cluster's slot map it reloads, costs round trips
// of their own (HELLO, CLIENT SETINFO, CLUSTER SLOTS), each bounded by the
// same timeouts and not by the deadline. Such a step that is slow but
// answered can carry the call past the bound by those round trips; one
// that fails (a paused or unreachable Redis) ends the attempt by its
// timeout, within the bound.

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// releaseGoroutines and acquireGoroutines count the releases and the
// acquire attempts that ran on a goroutine other than their caller's
// (awaitWith on releaseWaits, acquireWaits): what the inline path saves,
// and what its tests check.
var releaseGoroutines, acquireGoroutines atomic.Uint64

// A deadlineCtx is a context that ends only at its deadline: an inline
// release's. The coalescer queues calls with such a context (a call whose
// context can end otherwise runs alone: see Client.eval).
//
// It is relock's own rather than context.WithDeadline's: that one, boxed,
// costs five allocations per Unlock, this one four. It is not pooled, though a pool would
// save two more: go-redis hooks (tracing) may keep a command's context past the
// call, and a reused one would hand them another call's values and
// deadline.
type deadlineCtx struct {
	parent   context.Context
	deadline time.Time
	slack    time.Duration // what a request may run past deadline (clones.go)
	done     chan struct{} // closed at the deadline
	timer    *time.Timer

	// released is closed when the call is done (release); made by the
	// first AfterFunc only (a dial go-redis derives a context for), not
	// by every call. mu guards it and isReleased.
	mu         sync.Mutex
	released   chan struct{}
	isReleased bool
}

// newDeadlineCtx returns a context that carries parent's values and ends
// at deadline; the caller calls release once done with it.
func newDeadlineCtx(parent context.Context, deadline time.Time) *deadlineCtx {
	done := make(chan struct{})
	d := &deadlineCtx{parent: parent, deadline: deadline, done: done}
	d.timer = time.AfterFunc(time.Until(deadline), func() { close(done) })
	return d
}

// newBoundedCtx is newDeadlineCtx for a call bounded at deadline+slack,
// whose requests run on clients that end them within slack of deadline
// (Client.rdbFor).
func newBoundedCtx(parent context.Context, deadline time.Time, slack time.Duration) *deadlineCtx {
	d := newDeadlineCtx(parent, deadline)
	d.slack = slack
	return d
}

// release stops d's timer, its call done. d does not end then, unlike a
// context.WithDeadline at its cancel: go-redis may keep using a call's
// context past the call (a dial it started for the pool finishes under
// it), and ending d early would fail other callers' requests with its
// error; the bound needs d to end at its deadline only.
func (d *deadlineCtx) release() {
	d.timer.Stop()
	d.mu.Lock()
	d.isReleased = true
	if d.released != nil {
		close(d.released)
	}
	d.mu.Unlock()
}

// releasedChan is closed once d is released (see released).
func (d *deadlineCtx) releasedChan() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.released == nil {
		d.released = make(chan struct{})
		if d.isReleased {
			close(d.released)
		}
	}
	return d.released
}

func (d *deadlineCtx) Deadline() (time.Time, bool) { return d.deadline, true }
func (d *deadlineCtx) Done() <-chan struct{}       { return d.done }
func (d *deadlineCtx) Value(key any) any {
	if _, ok := key.(boundKey); ok {
		return d
	}
	return d.parent.Value(key)
}

// AfterFunc makes a context derived from d (context.WithTimeout in
// go-redis's dial, say) watch d by a timer of its own, stopped when that
// context is cancelled, rather than by a goroutine that could outlive the
// call (see context.AfterFunc). d ends at its deadline and nothing else,
// so a timer to it is the same; f waits for d's own timer to have ended d
// (the two fire in either order), and is not called when d was released
// first (d never ends then).
func (d *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	done, released := d.done, d.releasedChan()
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

// pastDeadline is how long a command that rdb has begun may run past its
// context's deadline: 0 where rdb ends it at the deadline
// (honoursDeadlines); else, for go-redis's own clients, its write and read
// timeouts, which bound a write and a read begun before the deadline (the
// pool wait, the dial and the retries stop at the deadline); -1 when they
// are unbounded or rdb is not one of go-redis's clients.
func pastDeadline(rdb redis.UniversalClient) time.Duration {
	t, ok := timeoutsOf(rdb)
	switch {
	case !ok:
		return -1
	case t.deadlines:
		return 0
	case t.read <= 0 || t.write <= 0:
		return -1
	}
	return t.read + t.write
}
