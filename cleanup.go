package relock

// Clean-up of what no caller will use: a grant taken back, a waiter that
// left the queue, an Unlock that failed. Each is tried at once and, when that
// fails, retried in the background until the lease it guards has run out.

import (
	"context"
	"time"
)

// unlockFailed ends an entry whose release could not be confirmed. The entry
// is over for the caller either way; a final release is retried in the
// background (the same request: its replay is recognised) until it is
// confirmed or the lease it would end has run out — from now when retry,
// else once the release in flight has returned (finishLate) — and the hold
// is no longer renewed, so a failed Unlock never keeps a lock past its
// current lease.
func (c *Client) unlockFailed(e *entry, req releaseReq, until time.Time, retry bool) {
	if !req.final {
		c.holds.mu.Lock()
		c.endEntryLocked(e, ErrUnlocked)
		c.holds.mu.Unlock()
		return
	}
	c.end(e.h, req.gen, ErrUnlocked)
	if retry {
		c.releaseInBackground(e.h.scheme, req, until)
	}
}

// releaseInBackground retries req until Redis answers it or until, when
// the lease has run out and the lock is free anyway. It is how an Unlock that
// failed and an acquire of unknown outcome are cleaned up.
func (c *Client) releaseInBackground(s scheme, req releaseReq, until time.Time) {
	if b, ok := s.(backgroundReleaser); ok {
		b.releaseInBackground(req, until)
		return
	}
	c.retryInBackground(releaseOp(s, req), until)
}

// A backgroundReleaser is a scheme that retries its releases its own way: a
// RedLock, master by master (see redScheme.releaseInBackground).
type backgroundReleaser interface {
	releaseInBackground(req releaseReq, until time.Time)
}

// releaseOp is req's release on s as a retryable op (the same request each
// time: its replay is recognised by op id).
func releaseOp(s scheme, req releaseReq) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := s.release(ctx, req)
		return err
	}
}

// leaveQueue runs call, a waitQueue's abandon script for a waiter that
// gave up: it leaves the queue and releases a grant that crossed its leaving.
// A failure is retried in the background: a grant nobody uses would block
// the lock for a lease (and an RWLock writer's claim hold readers up for the
// waiter timeout).
func (c *Client) leaveQueue(ctx context.Context, call scriptCall) {
	run := func(ctx context.Context) error { return c.eval(ctx, "leave queue", call).Err() }
	if err := run(ctx); err != nil && transient(err) {
		c.retryInBackground(run, time.Now().Add(c.opts.watchdogLease))
	}
}

// retryInBackground runs op until it succeeds, fails for good, the Client
// closes (after one last attempt) or until has passed. Once Close has
// stopped the background work (its wait for these goroutines has begun), op
// runs once, here, instead: a clean-up asked for by a call that ends after
// Close (a Lock whose grant came back late, an Unlock) still gets its
// attempt, and Close never waits for more than the attempts already
// running.
func (c *Client) retryInBackground(op func(context.Context) error, until time.Time) {
	started := c.goBackground(func() { c.retryUntil(op, until) })
	if !started {
		_ = op(context.Background()) // its fault is noted by the funnel (call.go)
	}
}

// retryUntil runs op, on the calling goroutine, until it succeeds, fails
// for good, the Client closes (after one last attempt then) or until has
// passed (see retryInBackground).
func (c *Client) retryUntil(op func(context.Context) error, until time.Time) {
	for n := 1; ; n++ {
		err := op(context.Background())
		if err == nil || !transient(err) {
			return
		}
		pause := faultBackoff(n)
		if time.Until(until) < pause {
			return
		}
		select {
		case <-c.closing:
			// One last attempt, which Close waits for within its bound:
			// Close hands back at once what the Client held.
			_ = op(context.Background())
			return
		case <-time.After(pause):
		}
	}
}
