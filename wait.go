package relock

import (
	"context"
	"fmt"
	"time"
)

// waitSpec is what a wait loop needs to know besides its attempt: how long
// it may wait, and for a scheme with a queue the waiter's id (see
// waitQueue) and the lease a hand-over grants it.
type waitSpec struct {
	wait  time.Duration
	id    string // "" : the scheme hands nothing over
	lease time.Duration
	obs   observed // the lock the Observer hears about (WaitStarted, Woken); nil: none
	// owner is the waiting owner's field in Redis, for deadlock detection
	// (deadlock.go); "": the wait takes no part.
	owner string
	// stray releases a grant, on the waiter's channel, to an id of this
	// Client that no longer waits (see subscriber.granted); zero: none.
	stray strayRelease
}

// deadline is when a wait that began at start ends (zero: never).
func (spec waitSpec) deadline(start time.Time) time.Time {
	if spec.wait == WaitForever {
		return time.Time{}
	}
	return start.Add(spec.wait)
}

// wait is the package's one acquisition loop, shared by every lock type:
// try; on busy, join the channel where the holder's release will be announced
// (subscribing if this process is the first to wait on it); then sleep until
// a wake-up, the holder's remaining lease, the wait time or ctx ends,
// whichever is first; try again. A wake-up that is a hand-over (the release
// granted the lock to this waiter) ends the wait at once, without another
// attempt, when the grant is provably the waiter's current one (see
// grantCheck); any other grant is claimed by the next attempt, at once. It
// returns the last attempt and how many times it slept.
//
// try must not be cancelled by ctx (see lockWith). The error wraps
// ErrNotObtained when the wait ended. A first attempt that fails returns its
// error at once (a Redis that cannot be reached is reported, not waited on);
// once waiting, a transient failure is retried with backoff until the wait
// ends.
func (c *Client) wait(ctx context.Context, spec waitSpec, try func() (attempt, error)) (attempt, int, error) {
	tried := time.Now()
	a, err := try()
	return c.waitFrom(ctx, spec, tried, a, err, try)
}

// waitFrom is wait once its first attempt, sent at tried, returned a and
// err: a caller that makes the first attempt itself goes to Redis one call
// less deep, and comes here only when that attempt did not acquire.
func (c *Client) waitFrom(ctx context.Context, spec waitSpec, tried time.Time, a attempt, err error, try func() (attempt, error)) (attempt, int, error) {
	check := grantCheck{claim: c.opts.replicas > 0}
	check.saw(a, err)
	if err != nil || a.outcome != busy {
		return a, 0, unavailable(err)
	}
	if spec.wait == 0 {
		return a, 0, a.notObtained()
	}
	deadline, slept := spec.deadline(tried), 0
	var faults faultRun
	var w *waiter
	defer func() {
		if w != nil {
			w.leave(err == nil && a.outcome == acquired)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	dl := c.watchDeadlocks(spec, tried)
	defer dl.end()
	for {
		if w, err = c.subs.follow(ctx, w, a, spec, tried); err != nil {
			return a, slept, err
		}
		sleep, ok := c.sleepBound(a, deadline)
		if !ok {
			return a, slept, afterFault(a.notObtained(), faults.last)
		}
		if slept++; slept == 1 {
			c.emitWaitStarted(ctx, spec.obs) // the caller reports the end when slept > 0
		}
		var handed bool
		var h attempt
		if h, handed, err = c.sleep(ctx, spec, w, timer, sleep, tried, check, &dl); handed {
			h.at = a.at // the position it was handed from
			return h, slept, nil
		}
		if err != nil {
			return a, slept, afterFault(err, faults.last)
		}
		tried = time.Now()
		var done bool
		if a, done, err = c.retry(a, try, &check, &faults); done {
			return a, slept, err
		}
	}
}

// retry makes the attempt of a wait loop that follows prev. done: it ends
// the wait, acquired or with another outcome than busy, or with a failure
// that is not to be ridden out (err); else a is the attempt to wait on,
// prev with a backoff after a failure ridden out.
func (c *Client) retry(prev attempt, try func() (attempt, error), check *grantCheck, faults *faultRun) (a attempt, done bool, err error) {
	a, err = try()
	check.saw(a, err)
	switch {
	case err == nil && a.outcome != busy:
		if a.outcome == acquired {
			a.at = prev.at // the claim of a grant from the queue
		}
		return a, true, nil
	case err != nil:
		if err = c.ride(err, faults); err != nil {
			return a, true, err
		}
		prev.retryIn = faultBackoff(faults.n)
		return prev, false, nil
	}
	*faults = faultRun{}
	return a, false, nil
}

// sleepBound is how long the next sleep of a wait loop may last after
// attempt a: until the holder's lease runs out (the fallback), cut at the
// wait's deadline (zero: none). It reports false once the deadline has
// passed.
func (c *Client) sleepBound(a attempt, deadline time.Time) (time.Duration, bool) {
	sleep := fallbackSleep(a.retryIn, c.opts.watchdogLease)
	if deadline.IsZero() {
		return sleep, true
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, false
	}
	return min(sleep, left), true
}

// sleep is one sleep of a wait loop, of at most d: it returns the attempt a
// release that handed the lock over to w amounts to (handed), or why the
// wait must end (err); neither means try again. A grant is taken as it is
// only when check trusts it and it comes within a third of the lease after
// the last attempt (tried), from whose start the hold's end is counted;
// any other is claimed by the next attempt, made at once, whose replay of
// the waiter's op id is the claim and extends the lease from then. The
// deadlock checks of dl that fall due meanwhile run within the sleep; the
// one that finds the waiter the victim of a deadlock ends the wait.
func (c *Client) sleep(ctx context.Context, spec waitSpec, w *waiter, timer *time.Timer, d time.Duration, tried time.Time, check grantCheck, dl *deadlockWatch) (a attempt, handed bool, err error) {
	end := dl.sleepEnd(d)
	timer.Reset(dl.cap(d))
	for {
		select {
		case <-ctx.Done():
			return a, false, notObtained(ctx)
		case <-c.closing:
			return a, false, errWaitClosed
		case <-w.signal():
			c.emitWoken(ctx, spec.obs)
			a, handed = w.handedOver()
			return a, handed && check.trusted() && time.Since(tried) < spec.lease/3, nil
		case <-timer.C:
			if !dl.due() {
				return a, false, nil
			}
			if err = dl.check(ctx); err != nil {
				return a, false, err
			}
			left := time.Until(end)
			if left <= 0 {
				return a, false, nil
			}
			timer.Reset(dl.cap(left))
		}
	}
}

// A strayRelease releases a grant of s's lock that reached c for a waiter
// id that no longer waits (see subscriber.granted): the abandon script of
// q, s's queue, for that id, which frees a hold of that generation,
// whoever its owner, and hands the lock on. A hold c has recorded under
// that generation is its own and kept. It is a value, not a closure: every
// Lock that may wait carries one, and few ever use it.
type strayRelease struct {
	c *Client
	s scheme
	q waitQueue // nil: no release (the zero strayRelease)
}

func (r strayRelease) release(id string) {
	if r.c.holds.holdsGeneration(r.s.holdID(), id) {
		return
	}
	r.c.log.Debug("relock: releasing a grant to a waiter that no longer waits", "lock", r.s.info().Name, "waiter", id)
	r.q.leave(context.Background(), "", id, 0)
}

// queuePlace is where a busy attempt left the waiter in the lock's queue,
// as the acquire scripts reply (Q_KEPT, Q_ANEW, Q_ABSENT in
// queue_common.lua); placeUnknown when the reply does not say.
type queuePlace int64

const (
	placeUnknown queuePlace = iota
	placeKept               // queued before the attempt, and still
	placeAnew               // queued by the attempt
	placeAbsent             // not queued
)

// grantCheck decides whether a grant message may be taken as it is, without
// a claim: a message is a hint about Redis, never a hold by itself. It may
// be taken only when it provably belongs to the waiter's current place in
// the queue. A waiter's id is new for each wait, so while the id has stayed
// queued from the attempt that first queued it to the last attempt (every
// later one kept its place), the only grant that can be addressed to it is
// the one that takes it out of the queue after that last attempt, and that
// hold runs at least a lease from the last attempt's start. Any doubt — the
// id was queued a second time (a grant whose hold ran out, or a queue that
// went with its hash, took it out before), it left the queue, an attempt
// failed (its outcome is unknown) or the reply did not say — makes every
// later grant go through a claim. So does WithReplicas: the claim is an
// attempt, whose WAIT covers the hand-over's writes.
type grantCheck struct {
	claim  bool // every grant is claimed
	queued bool // an attempt queued the id
}

// saw takes in the result of one attempt.
func (g *grantCheck) saw(a attempt, err error) {
	switch {
	case err != nil:
		g.claim = true
	case a.outcome != busy:
	case a.place == placeKept:
		g.claim = g.claim || !g.queued
	case a.place == placeAnew:
		g.claim = g.claim || g.queued
		g.queued = true
	case a.place == placeAbsent:
		g.claim = g.claim || g.queued
	default:
		g.claim = true
	}
}

// trusted reports whether a grant may be taken without a claim.
func (g grantCheck) trusted() bool { return !g.claim }

// faultRun counts the attempts of a wait that failed in a row.
type faultRun struct {
	n    int
	last error
}

// ride decides on an attempt that failed while waiting: a transient failure
// (a network fault, a restart, a failover) is ridden out until the wait
// ends — the scripts are replay-safe, so an attempt whose reply was lost is
// recognised by the next one — and is logged once per run; any other ends
// the wait.
func (c *Client) ride(err error, f *faultRun) error {
	if !transient(err) {
		return err
	}
	if f.n == 0 {
		c.log.Warn("relock: attempt failed while waiting; retrying", "err", err)
	}
	f.n, f.last = f.n+1, err
	return nil
}

// fallbackSleep is how long a waiter sleeps when no wake-up comes: the
// holder's remaining lease as Redis reported it. A lease that has run out
// (or is about to) is retried at once, and an unknown one (no key, no TTL)
// is bounded by the watchdog lease, so no wait is untimed.
func fallbackSleep(retryIn, bound time.Duration) time.Duration {
	switch {
	case retryIn < 0 || retryIn > bound:
		return bound
	case retryIn < time.Millisecond:
		return time.Millisecond
	}
	return retryIn
}

// leaseLeft turns a PTTL reply into an attempt's retryIn: -1 (no expiry)
// is unknown; -2 (the key just went) and 0 mean the lease has run out.
func leaseLeft(pttl int64) time.Duration {
	switch {
	case pttl == -1:
		return -1
	case pttl < 0:
		return 0
	}
	return time.Duration(pttl) * time.Millisecond
}

// notObtained is the error of a wait that ended on a busy attempt: it says
// why the lock was busy when the attempt knows more than "someone holds it".
func (a attempt) notObtained() error {
	if a.cause != nil {
		return fmt.Errorf("%w: %w", ErrNotObtained, a.cause)
	}
	return ErrNotObtained
}

// faultBackoff is the pause after the n-th failed attempt in a row (n >= 1).
func faultBackoff(n int) time.Duration {
	return min(25*time.Millisecond<<min(n, 6), time.Second)
}

// afterFault adds the error of the last failed attempt, if any, to the error
// that ended a wait.
func afterFault(err, last error) error {
	if last == nil {
		return err
	}
	return fmt.Errorf("%w (last attempt failed: %w)", err, last)
}
