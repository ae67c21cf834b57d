package relock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// checkLockArgs validates what every Lock/TryLock receives, before anything
// is sent, and refuses a context that has already ended.
func checkLockArgs(ctx context.Context, wait, lease time.Duration) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := checkWait(wait); err != nil {
		return err
	}
	if err := checkLease(lease); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return notObtained(ctx)
	}
	return nil
}

// lockWith is Lock/TryLock for every lock type: owner, serialisation,
// re-entry, waiting and the hold's context. On failure it returns ctx itself
// (never nil), so that the common `ctx, err = l.Lock(ctx)` keeps a usable
// context.
func lockWith(ctx context.Context, t target, wait, lease time.Duration) (context.Context, error) {
	n := t.partCount()
	for i := range n {
		if err := t.record(i).client().usable(); err != nil {
			return ctx, err
		}
	}
	if err := checkLockArgs(ctx, wait, lease); err != nil {
		return ctx, err
	}
	parent, o := withNewOwner(ctx, t.client())
	k := &lockCall{t: t, c: t.client(), queue: t.traits().queue, parent: parent, lease: lease, until: waitEnd(wait)}
	if !k.unbounded(ctx) { // its requests run detached: Close waits for it (calls.go)
		if err := k.c.calls.enter(); err != nil {
			return ctx, err
		}
		defer k.c.calls.leave()
	}
	if n > 1 { // a MultiLock's
		k.parts = make([]lockPart, n)
	} else {
		k.parts = k.onePart[:n]
	}
	for i := range n {
		r := t.record(i)
		k.parts[i].h = r.client().holds.enter(r, o.field(r.client()))
	}
	var err error
	k.taken, err = serialiseBy(ctx, k.parts, k.until)
	defer func() {
		if !k.detached { // else the background finish leaves (see detach)
			leave(k.parts, k.taken)
		}
	}()
	if err != nil {
		return ctx, err
	}
	held := true
	for i := range k.parts {
		p := &k.parts[i]
		p.held = p.h.client().holds.generation(p.h)
		held = held && p.held != ""
	}
	var hctx context.Context
	if held {
		hctx, err = k.reenter(ctx)
	} else {
		hctx, err = k.acquireNew(ctx, wait)
	}
	return hctx, acquireFailed(err)
}

// acquireFailed classifies an acquire's failure as every acquire's is: it
// wraps ErrNotObtained (and ErrUnavailable when no reply came, or
// ErrClientClosed when Close ended it: the caller holds nothing either
// way), whatever step failed; bad input stays what it is. An acquire that
// begins after Close never gets here: lockWith returns its ErrClientClosed
// as it is.
func acquireFailed(err error) error {
	if err == nil || errors.Is(err, ErrNotObtained) || errors.Is(err, ErrInvalidArgument) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotObtained, unavailable(err))
}

// A lockCall is one Lock or TryLock in the engine.
type lockCall struct {
	t      target
	c      *Client         // t.client(): where the call waits and is reported
	queue  waitQueue       // t.traits().queue: nil when waiters do not queue
	parent context.Context // ctx with its owner: the parent of the hold context
	source context.Context // a re-entry's: the caller's ctx, whose end parent follows (reentry.go)
	lease  time.Duration   // as asked: 0 for the watchdog's
	parts  []lockPart
	taken  int       // how many of the parts' semaphores the call took
	until  time.Time // the end of TryLock's wait (zero: none), which bounds the call as ctx does

	// An attempt in flight when the bound came (see bounded.go): its
	// reply, its op, whether that reply is to the request sent again
	// (settleCut: the first may still run), and whether the background
	// finishes the call.
	late       <-chan reply[attempt]
	lateOp     string
	lateResent bool
	detached   bool
	// ranRead is the read timeout of the go-redis client the last inline
	// attempt's request went on (0: the Client's own), for mayBeCopied.
	ranRead time.Duration

	// onePart holds parts for a call of one part (all but a MultiLock's):
	// a slice of their own would be an allocation per Lock.
	onePart [1]lockPart
}

// request is the acquire request of the call, but for its op: the first
// part's owner and generation (a target of several parts reads each part's
// from the parts), and the lease as asked.
func (k *lockCall) request() acquireReq {
	p := k.parts[0]
	return acquireReq{owner: p.h.key.owner, gen: p.held, lease: k.lease}
}

// acquireNew takes a lock the owner does not hold, waiting up to wait.
func (k *lockCall) acquireNew(ctx context.Context, wait time.Duration) (context.Context, error) {
	c := k.c
	// Scripts run detached from ctx: a script cancelled in flight may still
	// have run, and a hold nobody knows of would be leaked until its lease.
	dctx := detached(ctx)
	q := acquisition{req: k.request(), start: c.observedNow()}
	var stray strayRelease
	q.waitAs, stray = k.queueAs(&q.req, wait)
	if q.waitAs != "" {
		defer c.subs.settle(k.queue.channel(), q.waitAs) // after grant or giveUp
	}
	// The first attempt is made here, and the wait loop entered only when
	// it did not acquire.
	tried := time.Now()
	a, err := k.try(ctx, dctx, &q)
	slept := 0
	if err != nil || a.outcome != acquired {
		spec := waitSpec{wait: wait, id: q.waitAs, lease: c.leaseFor(k.lease), obs: k.t, owner: k.deadlockOwner(), stray: stray}
		a, slept, err = c.waitFrom(ctx, spec, tried, a, err, func() (attempt, error) { return k.try(ctx, dctx, &q) })
	}
	return k.finishNew(ctx, dctx, &q, a, slept, err)
}

// acquisition is what acquireNew keeps across its attempts.
type acquisition struct {
	req      acquireReq
	start    time.Time // of the call, for the Observer (zero: none is set)
	started  time.Time // when the last attempt was sent
	unknown  string    // op of the last attempt whose outcome is unknown
	waitAs   string    // the queued waiter's op id ("": it does not queue)
	attempts int
}

// try is one attempt of acquireNew, detached from ctx (dctx) but bounded
// by it.
func (k *lockCall) try(ctx, dctx context.Context, q *acquisition) (attempt, error) {
	if k.late != nil { // the bound came: never a second attempt in flight
		return attempt{}, k.c.overrun(ctx)
	}
	if q.waitAs == "" {
		q.req.newOp(k.c)
	} else {
		q.req.waiter = k.c.subs.listening(k.queue.channel())
	}
	q.started = time.Now()
	q.attempts++
	var a attempt
	var err error
	k.ranRead = 0
	if k.unbounded(ctx) { // the common case, one call less deep
		a, err = k.t.acquireParts(dctx, q.req, k.parts)
	} else {
		a, err = k.acquireBounded(ctx, dctx, q.req)
	}
	if k.late != nil {
		return a, err // settled by settleLate
	}
	if err == nil && a.outcome == acquired && !a.resent && k.mayBeCopied(q.started) {
		a.resent = true
	}
	a, q.unknown = k.settleAttempt(dctx, q.req, a, err, q.unknown, q.started)
	return a, err
}

// finishNew ends acquireNew once its last attempt, after slept sleeps,
// returned a and err: it keeps the grant and reports it, or gives up,
// freeing what an attempt may have taken.
func (k *lockCall) finishNew(ctx, dctx context.Context, q *acquisition, a attempt, slept int, err error) (context.Context, error) {
	err = waitResultErr(a, err)
	if err == nil && a.gen == "" {
		a.gen = q.req.op // handed over: the hold is named after the waiter
	}
	var hctx context.Context
	if err == nil {
		hctx, err = k.accept(dctx, q.req, a, q.started)
	}
	if slept > 0 {
		k.c.emitWait(ctx, k.t, k.parts[0].h.key.owner, q.start, q.attempts, err)
	}
	switch {
	case k.late != nil && err != nil:
		k.settleLate(dctx, q.req, q.waitAs, q.unknown, q.started)
		return ctx, err
	case k.late != nil:
		// Handed over while an attempt of the same waiter was in flight:
		// that attempt is a replay of this grant; the records stay
		// serialised until it has returned.
		k.detach(func(reply[attempt]) {})
	case err != nil:
		k.giveUpBounded(dctx, q.req, q.waitAs, q.unknown, q.started)
		return ctx, err
	}
	k.reportAcquired(ctx, q.start, q.attempts, slept > 0 || q.attempts > 1, false)
	return hctx, nil
}

// queueAs makes an acquisition that may wait on a scheme with a queue a queued
// waiter under one op id for all its attempts (req.op, which a hand-over
// names), registered with the subscriber before its first attempt so that
// a grant that beats the attempt's reply is kept for it. It returns that id
// ("" when the acquisition does not queue) and the release of a grant that
// reaches it once it no longer waits (a stray). The caller settles the id.
// (A target with a queue is a scheme's own record: one part.)
func (k *lockCall) queueAs(req *acquireReq, wait time.Duration) (waitAs string, stray strayRelease) {
	if k.queue == nil || wait == 0 {
		return "", strayRelease{}
	}
	req.newOp(k.c)
	req.waiter = true
	k.c.subs.expect(req.op)
	return req.op, strayRelease{k.c, k.parts[0].h.scheme, k.queue}
}

// waitResultErr is the error a finished wait ends acquireNew with: err, an
// outcome other than acquired made one, and the last attempt's cause added
// when it was a RedLock whose masters did not answer or whose grants did not
// reach their replicas (WithReplicas).
func waitResultErr(a attempt, err error) error {
	if err == nil && a.outcome != acquired {
		return fmt.Errorf("relock: unexpected acquire outcome %d", a.outcome)
	}
	if err == nil || errors.Is(err, a.cause) {
		return err
	}
	for _, why := range []error{ErrUnavailable, ErrNotReplicated} {
		if errors.Is(a.cause, why) && !errors.Is(err, why) {
			return fmt.Errorf("%w (last attempt: %w)", err, a.cause)
		}
	}
	return err
}

// settleAttempt takes in the result of one attempt of acquireNew (req,
// sent at started): it returns the attempt as the wait loop is to see it
// and the op, if any, whose grant may be left in Redis with nobody to use it
// (which giveUp frees), given unknown, the one before.
func (k *lockCall) settleAttempt(dctx context.Context, req acquireReq, a attempt, err error, unknown string, started time.Time) (attempt, string) {
	switch {
	case err == nil && a.outcome == acquired && k.expiredOnArrival(started):
		// The grant took over any earlier one, and may still hold.
		unknown = k.t.leftover(dctx, req, k.parts, req.op, a, nil)
		a = k.refuseExpired()
	case err == nil:
		// A definite answer settles earlier unknown attempts too: a
		// grant of theirs would have been taken over by this one.
		unknown, a.gen = "", req.op
	case outcomeUnknown(err):
		unknown = k.t.leftover(dctx, req, k.parts, req.op, a, err)
	}
	return a, unknown
}

// expiredOnArrival reports whether the lease of a grant whose script was
// sent at started has run out (by the Client's clock, less the margins a
// hold is recorded with) now that its reply is here: a reply slower than
// the lease. Redis may already have handed the lock to someone else, with a
// larger token, so the grant must not become a hold.
func (k *lockCall) expiredOnArrival(started time.Time) bool {
	lease := k.c.leaseFor(k.lease)
	life := safeLease(lease) - k.t.traits().drift(lease)
	return !time.Now().Before(started.Add(life))
}

// refuseExpired is the busy attempt, to be retried at once, that a grant
// which came back after its lease turns into (see settleAttempt, whose
// leftover took it back or left it to the retry): a waiter's retry replays
// its op id, which claims the hold with a lease from then if Redis still
// has it, and any other's retry takes over the owner's own leftover field
// as a new hold.
func (k *lockCall) refuseExpired() attempt {
	k.c.log.Debug("relock: a grant came back after its lease ran out; trying again", "lock", k.t.info().Name)
	busyNow := attempt{outcome: busy, retryIn: 0, cause: errExpiredOnArrival}
	if k.queue != nil {
		busyNow.channel = k.queue.channel() // the waiter stays subscribed
	}
	return busyNow
}

// errExpiredOnArrival is why a wait ended on a grant whose reply came after
// its lease had run out (see expiredOnArrival).
var errExpiredOnArrival = errors.New("relock: the grant's reply came after its lease had run out (Redis replies slower than the lease)")

// accept keeps the grant a, started when its script was sent, or takes
// it back when nobody will use it: WithReplicas could not confirm it, or
// the Client closed before it came back.
func (k *lockCall) accept(dctx context.Context, req acquireReq, a attempt, started time.Time) (context.Context, error) {
	if a.replication != nil {
		k.t.takeBack(dctx, req, k.parts, a) // as documented for WithReplicas
		return nil, a.replication
	}
	hctx := k.grant(a, started)
	if hctx == nil {
		k.t.takeBack(dctx, req, k.parts, a)
		return nil, fmt.Errorf("%w: it closed while the lock was being acquired; the grant was released", ErrClientClosed)
	}
	return hctx, nil
}

// reenter adds a hold for an owner that holds the lock already. It never
// waits. A re-entry whose reply is lost only raises the count in Redis,
// which is harmless: the owner's last Unlock frees the lock whatever the
// count says.
func (k *lockCall) reenter(ctx context.Context) (context.Context, error) {
	c := k.c
	req := k.request()
	req.newOp(c)
	started := time.Now()
	a, err := k.acquireBounded(ctx, detached(ctx), req)
	if k.late != nil {
		k.reenterLate()
		return ctx, err
	}
	if err != nil {
		return ctx, err
	}
	switch a.outcome {
	case acquired:
		if a.replication != nil {
			return ctx, a.replication
		}
		a.gen = req.gen
		parent, follow := k.reentryParent()
		k.source, k.parent = k.parent, parent
		hctx := k.grant(a, started)
		if hctx == nil {
			// The count Redis added is harmless: the owner's last Unlock
			// frees the lock whatever the count says.
			return ctx, fmt.Errorf("%w: it closed while the lock was being re-entered", ErrClientClosed)
		}
		follow(hctx)
		k.reportAcquired(ctx, started, 1, false, true)
		return hctx, nil
	case mismatch:
		cause := fmt.Errorf("%w: the hold was gone when the owner re-entered", ErrLockLost)
		for _, p := range k.parts {
			p.h.client().end(p.h, p.held, cause)
		}
		return ctx, cause
	}
	return ctx, fmt.Errorf("relock: unexpected acquire outcome %d", a.outcome)
}

// grant records a granted attempt, started when its script was sent, as one
// entry per record. Each entry's context derives from the previous one, so
// the last, which the caller gets, is cancelled as soon as the hold of any
// record ends, with its cause, and carries every entry, which Unlock ends.
// It returns nil, adding nothing, when a record's Client has closed (the
// caller then takes the grant back).
func (k *lockCall) grant(a attempt, started time.Time) context.Context {
	hctx, source := k.parent, k.parent
	if k.source != nil {
		source = k.source
	}
	for i, p := range k.parts {
		c := p.h.client()
		next := c.grant(p.h, hctx, source, a.grantOf(i), k.lease, started)
		if next == nil {
			k.ungrant(hctx, i)
			return nil
		}
		hctx = next
		c.keepPresence()
	}
	return hctx
}

// ungrant ends the entries that grant added, in hctx, for the first n
// parts before a later part's Client refused its own: a new hold's
// generation ends, a re-entered one only loses the entry just added.
func (k *lockCall) ungrant(hctx context.Context, n int) {
	for _, p := range k.parts[:n] {
		c := p.h.client()
		e := entryFrom(hctx, c, p.h.key.id)
		c.holds.mu.Lock()
		if p.held == "" {
			c.endLocked(p.h, e.gen, ErrClientClosed)
		} else {
			c.endEntryLocked(e, ErrClientClosed)
		}
		c.holds.mu.Unlock()
	}
}

// reportAcquired tells the Observer of a grant: per part, on each part's
// Client, so that every Lost or Released of a part of a MultiLock has its
// Acquired.
func (k *lockCall) reportAcquired(ctx context.Context, start time.Time, attempts int, contended, reentry bool) {
	for _, p := range k.parts {
		p.h.client().emitAcquired(ctx, p.h, start, attempts, contended, reentry)
	}
}

// doWith runs fn under a hold taken by lock and always released by unlock,
// even when fn panics. fn's error comes first.
func doWith(ctx context.Context, lock func(context.Context) (context.Context, error), unlock func(context.Context) error, fn func(context.Context) error) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: nil func", ErrInvalidArgument)
	}
	hctx, err := lock(ctx)
	if err != nil {
		return err
	}
	ran := false
	defer func() {
		uerr := unlock(hctx)
		switch {
		case uerr == nil:
		case ran && err == nil:
			err = &ReleaseError{Err: uerr}
		default:
			err = errors.Join(err, uerr)
		}
	}()
	err = fn(hctx)
	ran = true
	return err
}

// tokenOf returns the fencing token of the hold that ctx's owner has on s.
func tokenOf(ctx context.Context, s scheme) (int64, error) {
	c := s.client()
	if err := c.usable(); err != nil && !errors.Is(err, ErrClientClosed) {
		return 0, err
	}
	if ctx == nil {
		return 0, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	o := ownerFrom(ctx)
	if o == nil {
		return 0, errNoOwner("Lock")
	}
	gen, token, until := c.holds.find(s.holdID(), o.field(c))
	if gen == "" || (!until.IsZero() && !time.Now().Before(until)) {
		// A hold whose lease has run out by the Client's clock is over,
		// though the lease heap's timer that ends its record and its
		// context may fire a little later.
		return 0, ErrNotHeld
	}
	return token, nil
}

func notObtained(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrNotObtained, context.Cause(ctx))
}

// lost reports whether a hold's end cause is a loss (not an Unlock).
func lost(cause error) bool {
	return errors.Is(cause, ErrLockLost)
}

// outcomeUnknown reports whether a request that failed with err may have run
// in Redis: no reply came back (a network error or a timeout), as opposed to
// an error reply, which means the script did not run.
func outcomeUnknown(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}

// deadlockOwner is the owner a lock call publishes as waiting, "" for a
// call that takes no part in deadlock detection (a MultiLock's, whose parts
// may live in several deployments).
func (k *lockCall) deadlockOwner() string {
	if len(k.parts) != 1 || k.c.opts.deadlockAfter == 0 {
		return ""
	}
	return k.parts[0].h.key.owner
}

// sole is the target of one scheme's own record. It is generic in the
// scheme's type so that a sole of a one-pointer scheme (Lock's, FairLock's,
// RedLock's) is one pointer too, and passing it as a target allocates
// nothing.
type sole[S scheme] struct{ s S }

// soleOf is the target of s's own record.
func soleOf[S scheme](s S) sole[S] { return sole[S]{s} }

func (t sole[S]) client() *Client   { return t.s.client() }
func (t sole[S]) info() LockInfo    { return t.s.info() }
func (t sole[S]) traits() traits    { return t.s.traits() }
func (t sole[S]) partCount() int    { return 1 }
func (t sole[S]) record(int) scheme { return t.s }

func (t sole[S]) acquireParts(ctx context.Context, req acquireReq, parts []lockPart) (attempt, error) {
	req.owner, req.gen, req.lease = parts[0].h.key.owner, parts[0].held, t.client().leaseFor(req.lease)
	req.refs.owner, req.refs.gen = &parts[0].h.key.owner, &parts[0].held
	return t.s.acquire(ctx, req)
}

// leftover is op: a grant of op that is not used may stay in Redis, where
// the owner's next attempt takes it over (a waiter's replays its op id; any
// other's takes over the owner's own field), so it is freed only when the
// wait gives up.
func (sole[S]) leftover(_ context.Context, _ acquireReq, _ []lockPart, op string, _ attempt, _ error) string {
	return op
}

// takeBack releases the grant at once; if that fails, the background
// clean-up retries it until its lease has run out.
func (t sole[S]) takeBack(ctx context.Context, req acquireReq, parts []lockPart, a attempt) {
	c := t.client()
	lease := c.leaseFor(req.lease)
	rel := releaseReq{owner: parts[0].h.key.owner, op: c.newOp(), gen: a.gen, final: true, void: a.resent}
	if _, err := t.s.release(ctx, rel); err != nil {
		c.releaseInBackground(t.s, rel, time.Now().Add(lease))
	}
}

func (t sole[S]) releaseParts(ctx context.Context, parts []unlockPart) {
	p := &parts[0]
	op := t.client().newOpRef()
	p.req.op, p.req.refs = *op, argRefs{owner: &p.e.h.key.owner, op: op, gen: &p.e.gen}
	p.out, p.err = t.s.release(ctx, p.req)
}

// unlockError is the one part's error: one part fails at most once.
func (sole[S]) unlockError(_ []unlockPart, fails []partFailure) error { return fails[0].err }
