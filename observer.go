package relock

import "time"

// Observer receives what happens to a Client's locks, for metrics, traces and
// logs. Every field is optional: a nil func costs one nil check, and a nil
// *Observer (the default) costs nothing more. The funcs are called
// synchronously from the goroutine where the event happens (a Lock call, the
// watchdog, the subscriber, a lease timer), possibly with an internal mutex
// of the Client held: they must return quickly, never block and never call
// the Client, or they delay (or deadlock) the lock operations of the whole
// Client. They only observe: errors are returned to callers exactly as
// without an Observer.
//
// The extra/relockotel module turns an Observer into OpenTelemetry metrics
// and spans.
type Observer struct {
	// Acquired is called when a Lock or TryLock succeeds, re-entries included.
	Acquired func(AcquiredEvent)
	// Released is called when an Unlock ends one hold (Err == nil) or fails.
	Released func(ReleasedEvent)
	// Renewed is called after each watchdog tick that renewed holds.
	Renewed func(RenewedEvent)
	// Lost is called when a hold ends without Unlock: lease expired, key
	// gone, force-unlocked, renewals failed past the lease.
	Lost func(LostEvent)
	// WaitEnded is called when a Lock that had to wait returns, with or
	// without the lock; NotObtained tells a waiter that gave up.
	WaitEnded func(WaitEvent)
	// Woken is called when a waiting Lock is woken to try again.
	Woken func(LockInfo)
	// SubscriberReconnected is called when the subscriber connection of a
	// shard is back after it was lost.
	SubscriberReconnected func(SubscriberEvent)
}

// Kind names a lock type in events.
type Kind string

// The lock kinds of events.
const (
	KindLock      Kind = "lock"
	KindFairLock  Kind = "fairlock"
	KindReadLock  Kind = "read"
	KindWriteLock Kind = "write"
	KindMultiLock Kind = "multilock"
	KindRedLock   Kind = "redlock"
)

// LockInfo names the lock an event is about.
type LockInfo struct {
	Name string
	Kind Kind
}

// AcquiredEvent describes a successful Lock or TryLock.
type AcquiredEvent struct {
	LockInfo
	Wait      time.Duration // from the call to the grant
	Attempts  int           // acquire scripts run (0 for a re-entry served locally)
	Contended bool          // the first attempt found the lock busy
	Reentry   bool          // the owner already held the lock
	Token     int64         // fencing token of the hold (0 when off or none)
}

// ReleasedEvent describes an Unlock.
type ReleasedEvent struct {
	LockInfo
	Held  time.Duration // since this hold was granted
	Final bool          // the lock is free of this owner now
	Err   error         // the release could not be confirmed (see Unlock)
}

// RenewedEvent describes one watchdog tick.
type RenewedEvent struct {
	Holds    int           // holds the tick tried to renew
	Failed   int           // of which the renewal failed (retried)
	Duration time.Duration // of the tick
	Err      error         // the first failure, if any
}

// LostEvent describes a hold that ended without Unlock.
type LostEvent struct {
	LockInfo
	Held  time.Duration
	Cause error // wraps ErrLockLost or ErrClientClosed
}

// WaitEvent describes the end of a Lock that had to wait.
type WaitEvent struct {
	LockInfo
	Waited      time.Duration
	Attempts    int
	NotObtained bool  // it gave up: wait time, context or Client ended
	Err         error // why, when NotObtained
}

// SubscriberEvent describes a subscriber connection that came back.
type SubscriberEvent struct {
	Shard string        // node address ("" for a single-node client)
	Down  time.Duration // how long it was lost
	Err   error         // what ended it
}

// WithObserver sets the Client's Observer (default none). The Observer is
// copied: changing its fields later has no effect.
func WithObserver(o *Observer) Option {
	return func(opts *options) error {
		if o == nil {
			opts.observer = nil
			return nil
		}
		cp := *o
		opts.observer = &cp
		return nil
	}
}

// The emitters below are what the engine calls; each costs a nil check when
// no Observer is set.

func (c *Client) emitAcquired(s scheme, start time.Time, attempts int, contended, reentry bool, token int64) {
	if o := c.opts.observer; o != nil && o.Acquired != nil {
		o.Acquired(AcquiredEvent{LockInfo: s.info(), Wait: time.Since(start), Attempts: attempts,
			Contended: contended, Reentry: reentry, Token: token})
	}
}

func (c *Client) emitReleased(s scheme, since time.Time, final bool, err error) {
	if o := c.opts.observer; o != nil && o.Released != nil {
		o.Released(ReleasedEvent{LockInfo: s.info(), Held: time.Since(since), Final: final, Err: err})
	}
}

func (c *Client) emitLost(h *hold, cause error) {
	c.log.Warn("relock: lock lost", "lock", h.key.id, "cause", cause)
	if o := c.opts.observer; o != nil && o.Lost != nil {
		o.Lost(LostEvent{LockInfo: h.scheme.info(), Held: time.Since(h.since), Cause: cause})
	}
}

func (c *Client) emitWait(s scheme, start time.Time, attempts int, err error) {
	if o := c.opts.observer; o != nil && o.WaitEnded != nil {
		o.WaitEnded(WaitEvent{LockInfo: s.info(), Waited: time.Since(start), Attempts: attempts,
			NotObtained: err != nil, Err: err})
	}
}

func (c *Client) emitRenewed(holds, failed int, d time.Duration, err error) {
	if o := c.opts.observer; o != nil && o.Renewed != nil {
		o.Renewed(RenewedEvent{Holds: holds, Failed: failed, Duration: d, Err: err})
	}
}
