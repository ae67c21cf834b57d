package relock

import (
	"container/heap"
	"fmt"
	"time"
)

// leaseHeap ends, for the whole Client, each hold whose local lease end
// (hold.expiresAt) comes: the live holds ordered by it, and one timer armed
// for the earliest. A timer per hold would cost two allocations and a timer
// of the runtime's per Lock. Guarded by registry.mu.
type leaseHeap struct {
	holds []*hold
	timer *time.Timer
	// armed is when the timer fires (0: not armed). It is never later
	// than the first hold's lease end: a hold whose lease ends sooner
	// re-arms it, and a timer that fires for a hold that was extended or
	// ended since only re-arms it.
	armed monoTime
}

func (l *leaseHeap) Len() int { return len(l.holds) }
func (l *leaseHeap) Less(i, j int) bool {
	return l.holds[i].expiresAt.get() < l.holds[j].expiresAt.get()
}

func (l *leaseHeap) Swap(i, j int) {
	l.holds[i], l.holds[j] = l.holds[j], l.holds[i]
	l.holds[i].slot, l.holds[j].slot = int32(i+1), int32(j+1)
}

func (l *leaseHeap) Push(x any) {
	h := x.(*hold)
	l.holds = append(l.holds, h)
	h.slot = int32(len(l.holds))
}

func (l *leaseHeap) Pop() any {
	n := len(l.holds) - 1
	h := l.holds[n]
	l.holds[n] = nil
	l.holds = l.holds[:n]
	h.slot = 0
	return h
}

// extendLocked moves the hold's local lease end to until, if that is later:
// the lease of a leased hold, or for a watched one the lease its last
// successful renewal bought. The watched case matters when a renewal hangs
// (a paused server, a partition): the call may not return before Redis lets
// the lock go, and the holder must not believe past that. Called with the
// registry lock held.
func (c *Client) extendLocked(h *hold, until time.Time) {
	end := monoOf(until)
	if end <= h.expiresAt.get() {
		return
	}
	h.expiresAt.set(end)
	l := &c.holds.leases
	if h.slot == 0 {
		heap.Push(l, h)
	} else {
		heap.Fix(l, int(h.slot-1))
	}
	c.armLeasesLocked()
}

// dropLeaseLocked takes an ended hold out of the heap. The timer stays
// armed: a fire with nothing due only re-arms it.
func (c *Client) dropLeaseLocked(h *hold) {
	if h.slot != 0 {
		heap.Remove(&c.holds.leases, int(h.slot-1))
	}
	h.expiresAt.set(0)
}

// armLeasesLocked arms the timer for the first lease end, unless it fires
// sooner already.
func (c *Client) armLeasesLocked() {
	l := &c.holds.leases
	if len(l.holds) == 0 {
		return
	}
	next := l.holds[0].expiresAt.get()
	if l.armed != 0 && next >= l.armed {
		return
	}
	l.armed = next
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Until(next.time()), c.expireLeases)
	} else {
		l.timer.Reset(time.Until(next.time()))
	}
}

// expireLeases ends every hold whose lease has run out: a leased hold, or
// a watched one whose renewals failed until then.
func (c *Client) expireLeases() {
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	l := &r.leases
	l.armed = 0
	now := monoOf(time.Now())
	for len(l.holds) > 0 && now >= l.holds[0].expiresAt.get() {
		h := heap.Pop(l).(*hold)
		reason := LossExpired
		if h.watched {
			reason = LossRenewalFailed // the watchdog's renewals failed until the lease it bought ran out
		}
		c.endLocked(h, h.gen, lossCause(reason, fmt.Errorf("%w: lease expired", ErrLockLost)))
	}
	c.armLeasesLocked()
}
