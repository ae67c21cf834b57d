package relock

// Unlock's release on the caller's goroutine.
//
// Unlock is always bounded (WithUnlockTimeout). Handing a call to another
// goroutine and its reply back wakes a second P each way: on a small
// machine, where redis-server competes for the cores, that cost an
// uncontended Lock+Unlock ~25% of its time and a third of the Client's CPU
// (BenchmarkUncontendedParts/client 139-143 µs/op and 94-97 client-µs/op
// against 106-118 and 61-65 inline and timeouts, on 2 cores). So Unlock runs its release
// on the caller's goroutine whenever go-redis's own bounds end it by the
// unlock timeout:
//
//   - A go-redis client made with ContextTimeoutEnabled bounds the pool
//     wait, the dial, the write and the read by the context's deadline
//     itself (honoursDeadlines). The release runs under a context whose
//     deadline is the unlock bound.
//   - Without it, go-redis still stops its pool wait, its dial and its
//     retries at the context's deadline, but a write and a read it has
//     begun run to their own timeouts (pastDeadline: WriteTimeout +
//     ReadTimeout). Where that is at most half the unlock timeout (a client
//     with timeouts of 250 ms or less each, for the default 1 s), the
//     release runs under a context that ends that much before the bound,
//     so that a request begun by then is over by the bound. With go-redis's
//     default timeouts (3 s each) the release runs on a goroutine of
//     relock's and the caller waits for it at most the unlock timeout
//     (bounded.go).
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
// The limit, without ContextTimeoutEnabled: a connection that go-redis
// opens for the release, or a Cluster's slot map it reloads, costs round
// trips of their own (HELLO, CLIENT SETINFO, CLUSTER SLOTS), each bounded
// by the same timeouts and not by the deadline. Such a step that is slow
// but answered can carry the release past the bound by those round trips;
// one that fails (a paused or unreachable Redis) ends the attempt by its
// timeout, within the bound.
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

	"github.com/redis/go-redis/v9"
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

// inlineWithin reports whether a call bounded by bound can run on the
// caller's goroutine, go-redis ending it by then: rdb honours deadlines,
// or what it may run past one leaves at least half the bound to send the
// request in.
func (c *Client) inlineWithin(bound time.Duration) bool {
	return c.pastDeadline == 0 || (c.pastDeadline > 0 && 2*c.pastDeadline <= bound)
}
