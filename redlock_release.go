package relock

// The background release of a RedLock's masters: each master's Client has
// one retrier, which sends the releases that master did not confirm one at
// a time, with backoff, so that a dead or hung master is asked no more
// often however many releases wait for it.

import (
	"context"
	"sync"
	"time"
)

// maxPendingReleases bounds how many releases one Client's retrier keeps
// (about 200 bytes each). One more is not kept: its hold on that master
// ends with its lease, as a release retried until then would.
const maxPendingReleases = 10000

// releaseRetrier is a Client's retrier of RedLock releases on its master.
// Its goroutine runs while releases are pending and is one of the Client's
// background goroutines, which Close waits for within its bound.
type releaseRetrier struct {
	mu      sync.Mutex
	pending []pendingRelease // oldest first
	queued  map[string]bool  // the keys in pending
	running bool             // a goroutine drains pending
}

// pendingRelease is one release that waits for its master.
type pendingRelease struct {
	key   string // the lock's hash and the release's op id
	run   func(context.Context) error
	until time.Time // the hold's lease end: past it, the lock is free anyway
}

// retryRelease has c's retrier send run, the release key names on c's
// master, until it is confirmed, fails for good, or until has passed. The
// same key queued twice is sent once (a replay of a release is recognised,
// so the two are one request).
func (c *Client) retryRelease(key string, run func(context.Context) error, until time.Time) {
	q := &c.releases
	q.mu.Lock()
	if q.queued[key] || !q.room(until) {
		q.mu.Unlock()
		return
	}
	if q.queued == nil {
		q.queued = make(map[string]bool)
	}
	q.queued[key] = true
	q.pending = append(q.pending, pendingRelease{key: key, run: run, until: until})
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start && !c.goBackground(c.retryReleases) {
		go c.retryReleases() // after Close: one attempt, which Close does not wait for
	}
}

// room reports whether one more release fits, dropping those whose lease
// has ended to make room (with mu held).
func (q *releaseRetrier) room(until time.Time) bool {
	if !time.Now().Before(until) {
		return false
	}
	if len(q.pending) < maxPendingReleases {
		return true
	}
	now := time.Now()
	q.pending = q.keep(func(p pendingRelease) bool { return now.Before(p.until) })
	return len(q.pending) < maxPendingReleases
}

// keep returns pending without the releases keepIt refuses, forgetting
// their keys (with mu held).
func (q *releaseRetrier) keep(keepIt func(pendingRelease) bool) []pendingRelease {
	kept := q.pending[:0]
	for _, p := range q.pending {
		if keepIt(p) {
			kept = append(kept, p)
		} else {
			delete(q.queued, p.key)
		}
	}
	clear(q.pending[len(kept):]) // no reference to a dropped release's closure
	return kept
}

// retryReleases sends the pending releases until none is left. After a
// failure it pauses (faultBackoff), whatever arrives meanwhile: the
// releases queued then go with the next attempt. Once the Client has
// closed it makes one last attempt and drops what is left, to its leases.
func (c *Client) retryReleases() {
	q := &c.releases
	for n := 0; ; {
		last := closed(c.closing)
		emptied, progressed := q.drain()
		switch {
		case emptied:
			return
		case last:
			q.abandon()
			return
		case progressed:
			n = 0
		}
		n++
		t := time.NewTimer(faultBackoff(n))
		select {
		case <-c.closing:
		case <-t.C:
		}
		t.Stop()
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// drain sends the pending releases, oldest first, one at a time, until one
// fails in a way worth retrying: the master is not answering, and the rest
// would fail alike. It reports whether it emptied pending (the goroutine
// then ends) and whether any release was settled.
func (q *releaseRetrier) drain() (emptied, progressed bool) {
	for {
		q.mu.Lock()
		for len(q.pending) > 0 && !time.Now().Before(q.pending[0].until) {
			q.popLocked() // its lease has ended: the lock is free anyway
		}
		if len(q.pending) == 0 {
			q.pending = nil // the popped ones' room goes too
			q.running = false
			q.mu.Unlock()
			return true, progressed
		}
		p := q.pending[0]
		q.mu.Unlock()
		if err := p.run(context.Background()); err != nil && transient(err) {
			return false, progressed
		}
		q.mu.Lock()
		if len(q.pending) > 0 && q.pending[0].key == p.key {
			q.popLocked()
		} else { // room dropped expired ones meanwhile
			q.pending = q.keep(func(o pendingRelease) bool { return o.key != p.key })
		}
		q.mu.Unlock()
		progressed = true
	}
}

// popLocked drops the oldest pending release (with mu held).
func (q *releaseRetrier) popLocked() {
	delete(q.queued, q.pending[0].key)
	q.pending[0] = pendingRelease{}
	q.pending = q.pending[1:]
}

// abandon drops every pending release and lets the goroutine end.
func (q *releaseRetrier) abandon() {
	q.mu.Lock()
	q.pending = q.keep(func(pendingRelease) bool { return false })
	q.running = false
	q.mu.Unlock()
}
