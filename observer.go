package relock

import (
	"context"
	"errors"
	"time"
)

// Observer's funcs, each optional, run synchronously, maybe under a mutex:
// return at once; never call the Client or a hold context's Err. Per hold:
// Acquired, a final Released or Lost; per wait: WaitStarted, Woken, WaitEnded.
type Observer struct {
	Acquired              func(context.Context, AcquiredEvent) // a Lock succeeded, re-entries included
	Released              func(context.Context, ReleasedEvent) // an Unlock, or Close's release; never after Lost
	Renewed               func(RenewedEvent)                   // a watchdog tick renewed holds
	Lost                  func(LostEvent)                      // a hold ended without Unlock
	WaitStarted           func(context.Context, LockInfo)      // a Lock found the lock busy and waits
	Woken                 func(context.Context, LockInfo)      // a message, not the fallback timer, woke a waiter
	WaitEnded             func(context.Context, WaitEvent)     // a Lock that waited returns
	SubscriberReconnected func(SubscriberEvent)                // a lost subscriber connection is back
	Deadlock              func(context.Context, DeadlockEvent) // a waiter gave up to break a deadlock
}

// Kind names the lock type an event is about, as a metric label.
type Kind string

const (
	KindLock           Kind = "lock"
	KindFairLock       Kind = "fairlock"
	KindReadLock       Kind = "read"
	KindWriteLock      Kind = "write"
	KindMultiLock      Kind = "multilock" // a MultiLock's wait; its parts' events are KindLock
	KindRedLock        Kind = "redlock"
	KindSemaphore      Kind = "semaphore"
	KindCountDownLatch Kind = "countdownlatch" // its Wait: wait events only
	KindSpinLock       Kind = "spinlock"
)

// LockInfo names the lock an event is about.
type LockInfo struct {
	Name string
	Kind Kind
}

// Holder is an owner and its Client's name (WithName; "" when unknown).
type Holder struct{ Owner, ClientName string }

// text is the owner, followed by its Client's name in parentheses when
// known (see named).
func (h Holder) text() string {
	return named(h.Owner, map[string]string{h.Owner: h.ClientName})
}

// AcquiredEvent describes a successful Lock or TryLock.
type AcquiredEvent struct {
	LockInfo
	Holder
	Wait      time.Duration // from the call to the grant
	Attempts  int           // acquire scripts run (a re-entry runs one: Redis counts it)
	Contended bool          // the first attempt found the lock busy
	Reentry   bool          // the owner already held the lock
	Token     int64         // fencing token of the hold (0 when off or none)
}

// ReleasedEvent describes an Unlock.
type ReleasedEvent struct {
	LockInfo
	Holder
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
	Holder
	Held   time.Duration
	Reason LossReason // one of a fixed set: use it, not Cause's text, as a metric label
	Cause  error      // wraps ErrLockLost or ErrClientClosed; the hold context's cause
}

// LossReason says why a hold ended without Unlock (a metric label).
type LossReason string

const (
	LossExpired       LossReason = "expired"        // a lease time ran out
	LossRenewalFailed LossReason = "renewal_failed" // renewals failed until the lease ran out
	LossGone          LossReason = "gone"           // Redis no longer had the hold
	LossForceUnlocked LossReason = "force_unlocked" // a ForceUnlock or ForceRelease, by any Client
	LossClientClosed  LossReason = "client_closed"  // Close could not release it in Redis
)

// lossError is the cause of a loss whose reason the code that found it
// knows; it reads like the error it wraps.
type lossError struct {
	reason LossReason
	err    error
}

func (e *lossError) Error() string { return e.err.Error() }
func (e *lossError) Unwrap() error { return e.err }

// lossCause tags cause (which wraps ErrLockLost) with its reason.
func lossCause(reason LossReason, cause error) error {
	return &lossError{reason: reason, err: cause}
}

// reasonOf classifies the cause of a loss. A loss that no code tagged is a
// hold Redis no longer had (an Unlock or a re-entry found it gone).
func reasonOf(cause error) LossReason {
	var le *lossError
	switch {
	case errors.As(cause, &le):
		return le.reason
	case errors.Is(cause, ErrClientClosed):
		return LossClientClosed
	}
	return LossGone
}

// WaitEvent describes the end of a Lock that had to wait (Holder: the waiter).
type WaitEvent struct {
	LockInfo
	Holder
	Waited      time.Duration
	Attempts    int
	NotObtained bool  // it gave up: wait time, context or Client ended
	Err         error // why, when NotObtained
}

// DeadlockEvent describes a deadlock a waiter broke (Cycle: victim first).
type DeadlockEvent struct {
	LockInfo
	Cycle []DeadlockWait
}

// DeadlockWait is an owner's wait in a deadlock.
type DeadlockWait struct {
	Holder
	Lock LockInfo
}

// SubscriberEvent describes a subscriber connection that came back.
type SubscriberEvent struct {
	Shard string        // node address ("" for a single-node client)
	Down  time.Duration // how long it was lost
	Err   error         // what ended it
}

// WithObserver sets the Client's Observer (default none), copied.
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
// no Observer is set, and builds its event only when the hook is set.

// observedNow is the start of a call for its events' durations: the time
// now when an Observer is set, else the zero time (a clock read saved).
func (c *Client) observedNow() time.Time {
	if c.opts.observer == nil {
		return time.Time{}
	}
	return time.Now()
}

// observed is what an event is about: a scheme, or a MultiLock (its wait).
type observed interface{ info() LockInfo }

func (c *Client) emitAcquired(ctx context.Context, h *hold, start time.Time, attempts int, contended, reentry bool) {
	if o := c.opts.observer; o != nil && o.Acquired != nil {
		o.Acquired(ctx, AcquiredEvent{LockInfo: h.scheme.info(), Holder: c.holder(h.key.owner), Wait: time.Since(start),
			Attempts: attempts, Contended: contended, Reentry: reentry, Token: h.token})
	}
}

// emitReleased reports an Unlock of h, unless the end of h's generation was
// reported already (Lost at Close, or a loss that raced with the Unlock).
func (c *Client) emitReleased(ctx context.Context, h *hold, since time.Time, final bool, err error) {
	o := c.opts.observer
	if o == nil || final && h.told.Swap(true) || !final && h.told.Load() {
		return
	}
	if o.Released != nil {
		o.Released(ctx, ReleasedEvent{LockInfo: h.scheme.info(), Holder: c.holder(h.key.owner), Held: time.Since(since),
			Final: final, Err: err})
	}
}

// emitLost logs and reports the loss of h, once per generation. Called with
// the registry lock held.
func (c *Client) emitLost(h *hold, cause error) {
	if h.told.Swap(true) {
		return
	}
	c.log.Warn("relock: lock lost", "lock", h.key.id, "cause", cause)
	if o := c.opts.observer; o != nil && o.Lost != nil {
		o.Lost(LostEvent{LockInfo: h.scheme.info(), Holder: c.holder(h.key.owner), Held: time.Since(h.since.time()),
			Reason: reasonOf(cause), Cause: cause})
	}
}

// holder is the Holder of this Client's owner field owner: the Client's
// own name is known here, so no event reads Redis for it.
func (c *Client) holder(owner string) Holder {
	if owner == "" {
		return Holder{}
	}
	return Holder{Owner: owner, ClientName: c.opts.name}
}

// emitWaitStarted, emitWoken: s is nil for a wait that reports nothing.
func (c *Client) emitWaitStarted(ctx context.Context, s observed) {
	if o := c.opts.observer; o != nil && o.WaitStarted != nil && s != nil {
		o.WaitStarted(ctx, s.info())
	}
}

func (c *Client) emitWoken(ctx context.Context, s observed) {
	if o := c.opts.observer; o != nil && o.Woken != nil && s != nil {
		o.Woken(ctx, s.info())
	}
}

// emitWait reports the end of owner's wait ("" for a CountDownLatch's,
// which has no owner).
func (c *Client) emitWait(ctx context.Context, s observed, owner string, start time.Time, attempts int, err error) {
	if o := c.opts.observer; o != nil && o.WaitEnded != nil {
		o.WaitEnded(ctx, WaitEvent{LockInfo: s.info(), Holder: c.holder(owner), Waited: time.Since(start),
			Attempts: attempts, NotObtained: err != nil, Err: err})
	}
}

func (c *Client) emitRenewed(holds, failed int, d time.Duration, err error) {
	if o := c.opts.observer; o != nil && o.Renewed != nil {
		o.Renewed(RenewedEvent{Holds: holds, Failed: failed, Duration: d, Err: err})
	}
}

// emitDeadlock reports the deadlock that the victim, waiting for lock,
// breaks; cycle starts with the victim's own wait.
func (c *Client) emitDeadlock(ctx context.Context, lock LockInfo, cycle []waitRecord, names map[string]string) {
	if o := c.opts.observer; o != nil && o.Deadlock != nil {
		ev := DeadlockEvent{LockInfo: lock, Cycle: make([]DeadlockWait, len(cycle))}
		for i, r := range cycle {
			ev.Cycle[i] = DeadlockWait{Holder: Holder{Owner: r.owner, ClientName: names[r.owner]}, Lock: r.lock}
		}
		o.Deadlock(ctx, ev)
	}
}
