package relock

import (
	"context"
	"errors"
	"time"
)

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
// The hooks called from a caller's Lock or Unlock get the context that call
// was given, so that a span or a metric exemplar can attach to the caller's
// trace (passing it costs nothing). The others (Lost, Renewed,
// SubscriberReconnected) happen on the Client's own goroutines — most losses
// are found by a lease timer or the watchdog, not by a call — and get none.
//
// Per hold, the events come in this order: Acquired, then any number of
// Acquired (re-entries) and non-final Released, then exactly one end: a
// final Released (Unlock) or a Lost. A Lock that waits reports WaitStarted
// once, Woken for each wake-up, then exactly one WaitEnded, before its
// Acquired if it got the lock. MultiLock reports Acquired and Released per
// part, on each part's Client.
//
// The extra/relockotel module turns an Observer into OpenTelemetry metrics
// and spans.
type Observer struct {
	// Acquired is called when a Lock or TryLock succeeds, re-entries included.
	Acquired func(context.Context, AcquiredEvent)
	// Released is called when an Unlock ends one hold (Err == nil) or fails,
	// and when Close releases a hold (Final). It is not called for a hold
	// already reported by Lost (one that raced with the lease's end).
	Released func(context.Context, ReleasedEvent)
	// Renewed is called after each watchdog tick that renewed holds.
	Renewed func(RenewedEvent)
	// Lost is called when a hold ends without Unlock: lease expired, key
	// gone, force-unlocked, renewals failed past the lease, or the Client
	// closed while it was held and Close could not release it in Redis
	// (nothing renews it any more and its context is cancelled).
	Lost func(LostEvent)
	// WaitStarted is called when a Lock finds the lock busy and starts to
	// wait, before its first sleep. Exactly one WaitEnded follows, so that a
	// gauge of current waiters can be kept.
	WaitStarted func(context.Context, LockInfo)
	// Woken is called when a waiting Lock is woken to try again: by a
	// release announced on the lock's channel, or by its subscriber (the
	// subscription confirmed or restored after an outage). It is not called
	// when a waiter tries again because its fallback timer (the holder's
	// remaining lease) ran out without a wake-up.
	Woken func(context.Context, LockInfo)
	// WaitEnded is called when a Lock that had to wait returns, with or
	// without the lock; NotObtained tells a waiter that gave up.
	WaitEnded func(context.Context, WaitEvent)
	// SubscriberReconnected is called when the subscriber connection of a
	// shard is back after it was lost.
	SubscriberReconnected func(SubscriberEvent)
	// Deadlock is called when a waiting Lock, the victim of a deadlock (see
	// WithDeadlockDetection), gives up: once per broken deadlock, from the
	// victim's call, before its WaitEnded.
	Deadlock func(context.Context, DeadlockEvent)
}

// Kind names a lock type in events.
type Kind string

// The lock kinds of events.
const (
	KindLock      Kind = "lock"
	KindFairLock  Kind = "fairlock"
	KindReadLock  Kind = "read"
	KindWriteLock Kind = "write"
	KindMultiLock Kind = "multilock" // a MultiLock's wait; its parts' events are KindLock
	KindRedLock   Kind = "redlock"
	// KindSemaphore: a Semaphore's acquisitions (each one a hold).
	KindSemaphore Kind = "semaphore"
	// KindCountDownLatch: a CountDownLatch's Wait (WaitStarted, Woken,
	// WaitEnded only: a latch has no holds).
	KindCountDownLatch Kind = "countdownlatch"
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
	Attempts  int           // acquire scripts run (a re-entry runs one: Redis counts it)
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
	Held   time.Duration
	Reason LossReason // one of a fixed set: use it, not Cause's text, as a metric label
	Cause  error      // wraps ErrLockLost or ErrClientClosed; the hold context's cause
}

// LossReason says why a hold ended without Unlock, as one of a small fixed
// set of values (safe as a metric label; LostEvent.Cause has the details).
type LossReason string

// The reasons of LostEvent.
const (
	// LossExpired: the lease of a hold taken with a lease time ran out.
	LossExpired LossReason = "expired"
	// LossRenewalFailed: the watchdog could not renew the hold before its
	// lease ran out (Redis unreachable, too slow).
	LossRenewalFailed LossReason = "renewal_failed"
	// LossGone: Redis no longer had the hold when the watchdog, a re-entry
	// or an Unlock looked: deleted, expired there, forgotten in a restart
	// or a failover.
	LossGone LossReason = "gone"
	// LossForceUnlocked: ForceUnlock (a Semaphore's ForceRelease) of this
	// Client ended it.
	LossForceUnlocked LossReason = "force_unlocked"
	// LossClientClosed: the Client was closed while it was held.
	LossClientClosed LossReason = "client_closed"
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

// WaitEvent describes the end of a Lock that had to wait.
type WaitEvent struct {
	LockInfo
	Waited      time.Duration
	Attempts    int
	NotObtained bool  // it gave up: wait time, context or Client ended
	Err         error // why, when NotObtained
}

// DeadlockEvent describes a deadlock that a waiter of the Client broke by
// giving up: LockInfo is what it waited for, Cycle every wait of the
// cycle, the victim's first.
type DeadlockEvent struct {
	LockInfo
	Cycle []DeadlockWait
}

// DeadlockWait is one owner's wait in a deadlock: Owner as written in
// Redis ("<Client.ID()>:<n>", or a WithOwner id) waits for Lock.
type DeadlockWait struct {
	Owner string
	Lock  LockInfo
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

func (c *Client) emitAcquired(ctx context.Context, s observed, start time.Time, attempts int, contended, reentry bool, token int64) {
	if o := c.opts.observer; o != nil && o.Acquired != nil {
		o.Acquired(ctx, AcquiredEvent{LockInfo: s.info(), Wait: time.Since(start), Attempts: attempts,
			Contended: contended, Reentry: reentry, Token: token})
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
		o.Released(ctx, ReleasedEvent{LockInfo: h.scheme.info(), Held: time.Since(since), Final: final, Err: err})
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
		o.Lost(LostEvent{LockInfo: h.scheme.info(), Held: time.Since(h.since), Reason: reasonOf(cause), Cause: cause})
	}
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

func (c *Client) emitWait(ctx context.Context, s observed, start time.Time, attempts int, err error) {
	if o := c.opts.observer; o != nil && o.WaitEnded != nil {
		o.WaitEnded(ctx, WaitEvent{LockInfo: s.info(), Waited: time.Since(start), Attempts: attempts,
			NotObtained: err != nil, Err: err})
	}
}

func (c *Client) emitRenewed(holds, failed int, d time.Duration, err error) {
	if o := c.opts.observer; o != nil && o.Renewed != nil {
		o.Renewed(RenewedEvent{Holds: holds, Failed: failed, Duration: d, Err: err})
	}
}

// emitDeadlock reports the deadlock that the victim, waiting for lock,
// breaks; cycle starts with the victim's own wait.
func (c *Client) emitDeadlock(ctx context.Context, lock LockInfo, cycle []waitRecord) {
	if o := c.opts.observer; o != nil && o.Deadlock != nil {
		ev := DeadlockEvent{LockInfo: lock, Cycle: make([]DeadlockWait, len(cycle))}
		for i, r := range cycle {
			ev.Cycle[i] = DeadlockWait{Owner: r.owner, Lock: r.lock}
		}
		o.Deadlock(ctx, ev)
	}
}
