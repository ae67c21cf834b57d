package relock

// Close's release of the Client's holds: a closing process hands its locks
// and permits to the next owner at once instead of leaving them to their
// leases.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errClosedReleased is the cause of a hold that Close released in Redis: it
// wraps ErrClientClosed, and an Unlock of such a hold returns nil.
var errClosedReleased = fmt.Errorf("%w: the hold was released by Close", ErrClientClosed)

// errClosing is the cause a hold's context ends with when Close begins: it
// wraps ErrClientClosed. Close ends every hold's context before it sends
// any release (endContexts), so that a waiter elsewhere whom the release
// serves never acquires while the holder may still believe it holds.
var errClosing = fmt.Errorf("%w: Close releases the hold", ErrClientClosed)

// endContexts ends the context of every live hold's entries with
// errClosing. The holds stay live in the registry: releaseHolds releases
// them and ends them as their releases tell (errClosedReleased, which a
// later Unlock reads), and one whose release fails is still released by
// its Unlock.
func (c *Client) endContexts() {
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.m {
		if h.gen == "" {
			continue
		}
		for e := h.entries; e != nil; e = e.next {
			e.cancel(errClosing)
		}
	}
}

// releasedByClose reports whether cause is that of a hold Close released.
func releasedByClose(cause error) bool { return errors.Is(cause, errClosedReleased) }

// releaseHolds releases every live hold of the Client in Redis, each with
// one final release (whatever its re-entry count), all at once and bounded
// together by until (Close's unlock timeout). A hold whose release is
// confirmed ends with errClosedReleased; one with a request in flight past
// the bound, or whose release failed, is left to cancelAll and its lease.
func (c *Client) releaseHolds(until time.Time) {
	holds := c.holds.live(false)
	if len(holds) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, h := range holds {
		wg.Go(func() { c.releaseAtClose(h, until) })
	}
	wg.Wait()
}

// releaseAtClose releases hold h, in its turn behind any request of its
// owner in flight, and ends it when Redis confirms.
func (c *Client) releaseAtClose(h *hold, until time.Time) {
	c.holds.use(h)
	parts := []closePart{{h}}
	taken, err := serialiseBy(context.Background(), parts, until)
	if err != nil {
		leave(parts, taken)
		return
	}
	c.holds.mu.Lock()
	req := &releaseReq{owner: h.key.owner, op: c.newOp(), gen: h.gen, final: true, ahead: h.next(), until: h.expiresAt.time(), void: h.void}
	if req.gen != "" {
		h.releasing = true
	}
	c.holds.mu.Unlock()
	if req.gen == "" {
		leave(parts, taken)
		return
	}
	req.refs = argRefs{owner: &req.owner, op: &req.op, gen: &req.gen}
	out, err, late := awaitBounded(context.Background(), until, func() (releaseOutcome, error) {
		return h.scheme.release(context.Background(), *req)
	})
	if late != nil { // the owner's next request waits for this one
		go func() {
			r := <-late
			c.settleClose(h, req.gen, r.v, r.err)
			leave(parts, taken)
		}()
		return
	}
	c.settleClose(h, req.gen, out, err)
	leave(parts, taken)
}

// settleClose ends hold h of generation gen as its release at Close tells.
func (c *Client) settleClose(h *hold, gen string, out releaseOutcome, err error) {
	switch {
	case err != nil:
		c.closeFailed(h)
	case out == notHeld:
		c.end(h, gen, fmt.Errorf("%w: the hold was gone when Close released it", ErrLockLost))
	default:
		c.emitReleased(context.Background(), h, h.since.time(), true, nil)
		c.end(h, gen, errClosedReleased)
	}
}

// closeFailed leaves a hold whose release at Close failed as it was: its
// Unlock still releases it (see cancelAll).
func (c *Client) closeFailed(h *hold) {
	c.holds.mu.Lock()
	h.releasing = false
	c.holds.mu.Unlock()
}

// closePart is a hold as serialiseBy and leave take it.
type closePart struct{ h *hold }

func (p closePart) hold() *hold { return p.h }

// awaitGroup waits for wg's goroutines until at the latest. One that Redis
// holds up (a dial, a handshake, a request go-redis still waits for) ends by
// itself once go-redis's timeouts end its call; Close does not wait for it.
func awaitGroup(wg *sync.WaitGroup, until time.Time) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// errWaitClosed is how a wait that Close interrupts ends, whatever the
// waiter's context: not obtained, as every acquire that gives up.
var errWaitClosed = fmt.Errorf("%w: %w: Close ended the wait", ErrNotObtained, ErrClientClosed)
