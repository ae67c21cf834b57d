package relock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// A scheme is what one lock type contributes to the shared engine: its
// scripts, run for one owner. Everything else — owners, hold contexts,
// waiting, the watchdog, replays, clean-up after faults — is common to every
// lock type and lives in this file.
type scheme interface {
	client() *Client
	// holdID names the lock (and mode) in the Client's registry of holds.
	holdID() string
	info() LockInfo
	// acquire runs the acquire script once.
	acquire(ctx context.Context, r acquireReq) (attempt, error)
	// release runs the release script once.
	release(ctx context.Context, r releaseReq) (releaseOutcome, error)
	// renewal is the watchdog's work item for one generation of owner's
	// hold: renew it to lease, or only check it (lease 0).
	renewal(owner, gen string, lease time.Duration) renewal
	// abandon is called when a wait for the lock ends without it, so that
	// types that register waiters in Redis (FairLock) can take them out.
	// waiter is the waiter's id in a handingScheme's queue ("" when it
	// did not queue).
	abandon(ctx context.Context, owner, waiter string)
}

// A partedScheme keeps its hold in the records of other schemes, its parts
// (MultiLock: one Lock per part, each in its own Client's registry), instead
// of a record of its own. The engine enters, serialises, grants and ends
// every part's record as it does the one record of another scheme; the
// partedScheme's acquire and release run all the parts at once. They find
// the parts in the request (acquireReq.parts, releaseReq.parts) and leave
// each part's result there.
type partedScheme interface {
	scheme
	parts() []scheme
	// takeBack releases every part of a grant that nobody will use (see
	// lockCall.takeBack), handing what it cannot release to the background
	// clean-up; lease is as asked.
	takeBack(ctx context.Context, parts []part, lease time.Duration) error
}

func isParted(s scheme) bool {
	_, ok := s.(partedScheme)
	return ok
}

// records returns the schemes whose hold records a call on s works on, in
// the order their semaphores are taken: s itself, or a partedScheme's parts.
func records(s scheme) []scheme {
	if p, ok := s.(partedScheme); ok {
		return p.parts()
	}
	return []scheme{s}
}

// A part is one hold record a Lock or Unlock call works on — the lock's own,
// or one part's of a partedScheme — and its share of the call.
type part struct {
	h *hold
	// Lock: the generation held when the call began ("" for none), then
	// the generation and token of the grant (set by a partedScheme's acquire
	// when it grants).
	held, gen string
	token     int64
	// Unlock: the entry it ends; live when that has not ended yet, and then
	// its request (whose op a partedScheme's release sets), lease end, start
	// and the release's outcome or error.
	e            *entry
	live         bool
	req          releaseReq
	until, since time.Time
	out          releaseOutcome
	err          error
}

// serialise takes the semaphores of the parts' records in order, so that
// two calls of one owner over overlapping parts cannot deadlock, and
// returns how many it took. It gives up when ctx ends. Either way the caller
// calls leave.
func serialise(ctx context.Context, parts []part) (int, error) {
	for i, p := range parts {
		select {
		case p.h.sem <- struct{}{}:
		case <-ctx.Done():
			return i, notObtained(ctx)
		}
	}
	return len(parts), nil
}

// leave gives back the first taken semaphores and ends the call's use of
// every part's record.
func leave(parts []part, taken int) {
	for i := taken - 1; i >= 0; i-- {
		<-parts[i].h.sem
	}
	for _, p := range parts {
		p.h.client().holds.exit(p.h)
	}
}

// acquireReq is one run of an acquire script. op names this very request
// (a replay of it is recognised by it); gen is the generation the owner
// holds, "" for a new acquisition, whose generation will be op.
//
// For a partedScheme, owner and gen are per part, in parts, and lease is as
// asked (0: each part's watchdog lease).
type acquireReq struct {
	owner, op, gen string
	lease          time.Duration
	parts          []part
	// waiter: op is the id of a waiter (a handingScheme's acquisition that
	// may wait), so a busy attempt queues it. A TryLock that does not wait
	// never queues, and so leaves nothing to take back.
	waiter bool
}

// releaseReq is one run of a release script; final says the Client has no
// other entry of this hold, so the lock is freed whatever the count says.
// For a partedScheme, the requests are per part, in parts.
type releaseReq struct {
	owner, op, gen string
	final          bool
	parts          []part
	// until is when the hold's lease ends at the latest (zero: unknown): a
	// scheme that retries part of a release in the background stops then.
	until time.Time
}

// A handingScheme queues its waiters in Redis and has its releases hand
// the lock over to the first of them (see queue_common.lua): a waiter sends
// the same op id at every attempt, which is its id in the queue and the
// generation of the hold a hand-over grants it, and the grant reaches it on
// its Client's channel for the lock (waitChannel, which its busy attempts
// name). A waiter queues only while its Client listens there: a release
// skips a waiter whose Client does not (see hand_over), so one queued before
// its subscription is confirmed could lose its place to a later one. The
// first wait on a lock therefore queues at the attempt that follows the
// subscription's confirmation; later ones, on a lingering subscription, at
// their first.
type handingScheme interface {
	waitChannel() string
}

func handsOver(s scheme) bool {
	_, ok := s.(handingScheme)
	return ok
}

type outcome int

const (
	busy     outcome = iota // held by another owner
	acquired                // granted (or re-entered)
	mismatch                // the generation the Client holds is gone from Redis: lost
)

// attempt is the result of one run of an acquire script: what every scheme
// returns.
type attempt struct {
	outcome outcome
	gen     string        // acquired: the hold's generation (set by the engine)
	token   int64         // acquired: fencing token of the hold
	retryIn time.Duration // busy: the remaining lease of the holder (< 0: unknown)
	channel string        // busy: where the holder's release is announced ("" to poll at retryIn)
	place   queuePlace    // busy: where the attempt left the waiter in the lock's queue (see wait.go)
	attemptExtras
}

// attemptExtras are the results of one feature each, which only some
// schemes return. They stay on the attempt because the shared loop reads
// them: subs by subscriber.follow (a MultiLock waits on another Client's
// subscriber), cause by attempt.notObtained (why a RedLock round failed),
// replication by lockWith (a grant WithReplicas could not confirm is undone).
// The next step, if they grow: cause as the error of a busy attempt,
// replication kept by the scheme, subs named by the channel.
type attemptExtras struct {
	subs  *subscriber // busy: which Client carries channel (nil: the scheme's) — MultiLock
	cause error       // busy: why, when it is not simply another holder (joined to ErrNotObtained) — RedLock
	// acquired with WithReplicas: why the grant did not reach the replicas
	// (nil: it did). lockWith then undoes the grant.
	replication error
}

type releaseOutcome int

const (
	released  releaseOutcome = iota // the lock is free
	stillHeld                       // one hold released, the owner keeps the rest
	notHeld                         // the generation was gone: lost
)

// renewal is one hold's share of a watchdog batch. Items with the same script
// go out in one call: KEYS are the items' keys one after the other, ARGV the
// items' args in the same order. The script returns one integer per item:
// 1 renewed, 0 gone.
type renewal struct {
	call scriptCall
	// run, when set, renews the hold by itself instead of joining a batch:
	// for a hold spread over several deployments (RedLock), which no single
	// script call can reach. It returns 1 renewed, 0 gone, like a script.
	run func(ctx context.Context) (int64, error)
}

// runAcquire runs an acquire script's call and returns its integer reply.
// With WithReplicas it pipelines a WAIT after the script (see replicas.go);
// repl is then non-nil when the script's writes did not reach the replicas.
// A WAIT after an attempt that wrote nothing (the lock was busy) returns at
// once.
func (c *Client) runAcquire(ctx context.Context, sc scriptCall) (vals []int64, repl error, err error) {
	if c.opts.replicas == 0 {
		vals, err = c.script(ctx, sc).Int64Slice()
		return vals, nil, err
	}
	target, err := c.waitTarget(ctx, sc.keys[0])
	if err != nil {
		return nil, nil, err
	}
	var wait *redis.IntCmd
	cmds, _ := evalPipeline(ctx, target, []scriptCall{sc}, func(pipe redis.Pipeliner) { wait = c.queueWait(ctx, pipe) })
	if vals, err = cmds[0].Int64Slice(); err != nil {
		return nil, nil, err
	}
	return vals, c.replicated(wait), nil
}

// evalPipeline sends calls in one pipeline on target by EVALSHA, then sends
// again, by EVAL in a second pipeline, those the server did not know yet
// (NOSCRIPT): a script's source crosses the network once per server. after,
// when set, adds commands at the end of each pipeline sent (WithReplicas's
// WAIT). It returns each call's reply, in order, and how many pipelines it
// sent.
func evalPipeline(ctx context.Context, target redis.Cmdable, calls []scriptCall, after func(redis.Pipeliner)) ([]*redis.Cmd, int) {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds, 0
	}
	send := func(eval bool, todo []int) {
		pipe := target.Pipeline()
		for _, i := range todo {
			sc := calls[i]
			if eval {
				cmds[i] = sc.script.Eval(ctx, pipe, sc.keys, sc.args...)
			} else {
				cmds[i] = sc.script.EvalSha(ctx, pipe, sc.keys, sc.args...)
			}
		}
		if after != nil {
			after(pipe)
		}
		_, _ = pipe.Exec(ctx) // errors are read per command
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	send(false, all)
	var missing []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return cmds, 1
	}
	send(true, missing)
	return cmds, 2
}

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
func lockWith(ctx context.Context, s scheme, wait, lease time.Duration) (context.Context, error) {
	recs := records(s)
	for _, r := range recs {
		if err := r.client().usable(); err != nil {
			return ctx, err
		}
	}
	if err := checkLockArgs(ctx, wait, lease); err != nil {
		return ctx, err
	}
	parent, o := withNewOwner(ctx, s.client())
	k := &lockCall{s: s, c: s.client(), parted: isParted(s), parent: parent, lease: lease, parts: make([]part, len(recs)), until: waitEnd(wait)}
	for i, r := range recs {
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
	if held {
		return k.reenter(ctx)
	}
	return k.acquireNew(ctx, wait)
}

// A lockCall is one Lock or TryLock in the engine.
type lockCall struct {
	s      scheme
	c      *Client         // s.client(): where the call waits and is reported
	parted bool            // s is a partedScheme
	parent context.Context // ctx with its owner: the parent of the hold context
	source context.Context // a re-entry's: the caller's ctx, whose end parent follows (reentry.go)
	lease  time.Duration   // as asked: 0 for the watchdog's
	parts  []part
	taken  int       // how many of the parts' semaphores the call took
	until  time.Time // the end of TryLock's wait (zero: none), which bounds the call as ctx does

	// An attempt in flight when the bound came (see bounded.go): its
	// reply, its op, and whether the background finishes the call.
	late     <-chan reply[attempt]
	lateOp   string
	detached bool
}

// request is the acquire request of the call, but for its op.
func (k *lockCall) request() acquireReq {
	if k.parted {
		return acquireReq{lease: k.lease, parts: k.parts}
	}
	p := k.parts[0]
	return acquireReq{owner: p.h.key.owner, gen: p.held, lease: k.c.leaseFor(k.lease)}
}

// acquireNew takes a lock the owner does not hold, waiting up to wait.
func (k *lockCall) acquireNew(ctx context.Context, wait time.Duration) (context.Context, error) {
	s, c := k.s, k.c
	// Scripts run detached from ctx: a script cancelled in flight may still
	// have run, and a hold nobody knows of would be leaked until its lease.
	dctx := context.WithoutCancel(ctx)
	req := k.request()
	start := c.observedNow()
	var started time.Time
	unknown := "" // op of the last attempt whose outcome is unknown
	attempts := 0
	waitAs := ""
	var stray func(string)
	if handsOver(s) && wait != 0 {
		req.op, req.waiter = c.newOp(), true
		waitAs = req.op
		c.subs.expect(waitAs)
		defer c.subs.settle(s.(handingScheme).waitChannel(), waitAs) // after grant or giveUp
		stray = c.strayRelease(s)
	}
	try := func() (attempt, error) {
		if k.late != nil { // the bound came: never a second attempt in flight
			return attempt{}, overrun(ctx)
		}
		if waitAs == "" {
			req.op = c.newOp()
		} else {
			req.waiter = c.subs.listening(s.(handingScheme).waitChannel())
		}
		started = time.Now()
		attempts++
		a, err := k.acquireBounded(ctx, dctx, req)
		if k.late != nil {
			return a, err // settled by settleLate
		}
		a, unknown = k.settleAttempt(dctx, a, err, req.op, unknown, started)
		return a, err
	}
	a, slept, err := c.wait(ctx, waitSpec{wait: wait, id: waitAs, lease: req.lease, obs: s, stray: stray}, try)
	if err == nil && a.outcome != acquired {
		err = fmt.Errorf("relock: unexpected acquire outcome %d", a.outcome)
	}
	if err != nil && errors.Is(a.cause, ErrUnavailable) && !errors.Is(err, ErrUnavailable) {
		err = fmt.Errorf("%w (last attempt: %w)", err, a.cause) // a RedLock whose masters did not answer
	}
	if err == nil && a.gen == "" {
		a.gen = req.op // handed over: the hold is named after the waiter
	}
	var hctx context.Context
	if err == nil {
		hctx, err = k.record(dctx, req, a, started)
	}
	if slept > 0 {
		c.emitWait(ctx, s, start, attempts, err)
	}
	switch {
	case k.late != nil && err != nil:
		k.settleLate(dctx, req, waitAs, unknown, started)
		return ctx, err
	case k.late != nil:
		// Handed over while an attempt of the same waiter was in flight:
		// that attempt is a replay of this grant; the records stay
		// serialised until it has returned.
		k.detach(func(reply[attempt]) {})
	case err != nil:
		k.giveUpBounded(dctx, req, waitAs, unknown, started)
		return ctx, err
	}
	k.reportAcquired(ctx, start, attempts, slept > 0 || attempts > 1, false)
	return hctx, nil
}

// settleAttempt takes in the result of one attempt of acquireNew (op, sent
// at started): it returns the attempt as the wait loop is to see it and the
// op, if any, whose grant may be left in Redis with nobody to use it (which
// giveUp frees), given unknown, the one before.
func (k *lockCall) settleAttempt(dctx context.Context, a attempt, err error, op, unknown string, started time.Time) (attempt, string) {
	switch {
	case err == nil && a.outcome == acquired && k.expiredOnArrival(started):
		a = k.refuseExpired(dctx, a)
		if !k.parted { // a partedScheme took its parts back
			unknown = op // it took over any earlier grant, and may still hold
		}
	case err == nil:
		// A definite answer settles earlier unknown attempts too: a
		// grant of theirs would have been taken over by this one.
		unknown, a.gen = "", op
	case outcomeUnknown(err) && !k.parted: // a partedScheme frees its parts itself
		unknown = op
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
	life := safeLease(lease)
	if d, ok := k.s.(driftingScheme); ok {
		life -= d.drift(lease)
	}
	return !time.Now().Before(started.Add(life))
}

// refuseExpired turns a grant that came back after its lease into a busy
// attempt to be retried at once: a waiter's retry replays its op id, which
// claims the hold with a lease from then if Redis still has it, and any
// other's retry takes over the owner's own leftover field as a new hold. A
// partedScheme takes its parts back first (their own clean-up retries a
// failed release in the background).
func (k *lockCall) refuseExpired(dctx context.Context, a attempt) attempt {
	k.c.log.Debug("relock: a grant came back after its lease ran out; trying again", "lock", k.s.info().Name)
	busyNow := attempt{outcome: busy, retryIn: 0}
	busyNow.cause = errExpiredOnArrival
	if p, ok := k.s.(partedScheme); ok {
		_ = p.takeBack(dctx, k.parts, k.lease)
		return busyNow
	}
	if hs, ok := k.s.(handingScheme); ok {
		busyNow.channel = hs.waitChannel() // the waiter stays subscribed
	}
	return busyNow
}

// errExpiredOnArrival is why a wait ended on a grant whose reply came after
// its lease had run out (see expiredOnArrival).
var errExpiredOnArrival = errors.New("relock: the grant's reply came after its lease had run out (Redis replies slower than the lease)")

// giveUp cleans up after a wait that ended without the lock: the waiter
// (waitAs, "" when it never queued) leaves the lock's queue, and a grant
// that may exist in Redis with nobody to use it (unknown: the op of an
// attempt whose outcome is unknown, sent at started) is freed in the
// background instead of blocking others for a lease.
func (k *lockCall) giveUp(dctx context.Context, req acquireReq, waitAs, unknown string, started time.Time) {
	k.s.abandon(dctx, req.owner, waitAs)
	if unknown != "" {
		k.c.releaseInBackground(k.s, releaseReq{owner: req.owner, op: k.c.newOp(), gen: unknown, final: true}, started.Add(req.lease))
	}
}

// record records the grant a, started when its script was sent, or takes
// it back when nobody will use it: WithReplicas could not confirm it, or
// the Client closed before it came back.
func (k *lockCall) record(dctx context.Context, req acquireReq, a attempt, started time.Time) (context.Context, error) {
	if a.replication != nil {
		k.takeBack(dctx, req, a.gen) // as documented for WithReplicas
		return nil, a.replication
	}
	hctx := k.grant(a, started)
	if hctx == nil {
		k.takeBack(dctx, req, a.gen)
		return nil, fmt.Errorf("%w: it closed while the lock was being acquired; the grant was released", ErrClientClosed)
	}
	return hctx, nil
}

// takeBack releases a grant (generation gen) that nobody will use: one
// WithReplicas could not confirm, or one that came back after the Client
// closed. It releases it at once; if that fails, the background clean-up
// retries it until its lease has run out. A partedScheme takes back every
// part of the grant.
func (k *lockCall) takeBack(dctx context.Context, req acquireReq, gen string) {
	if p, ok := k.s.(partedScheme); ok {
		_ = p.takeBack(dctx, k.parts, k.lease) // its failures go to the background
		return
	}
	rel := releaseReq{owner: req.owner, op: k.c.newOp(), gen: gen, final: true}
	if _, err := k.s.release(dctx, rel); err != nil {
		k.c.releaseInBackground(k.s, rel, time.Now().Add(req.lease))
	}
}

// reenter adds a hold for an owner that holds the lock already. It never
// waits. A re-entry whose reply is lost only raises the count in Redis,
// which is harmless: the owner's last Unlock frees the lock whatever the
// count says.
func (k *lockCall) reenter(ctx context.Context) (context.Context, error) {
	c := k.c
	req := k.request()
	req.op = c.newOp()
	started := time.Now()
	a, err := k.acquireBounded(ctx, context.WithoutCancel(ctx), req)
	if k.late != nil {
		k.reenterLate()
		return ctx, err
	}
	if err != nil {
		c.observe(err)
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
// It returns nil, recording nothing, when a record's Client has closed (the
// caller then takes the grant back).
func (k *lockCall) grant(a attempt, started time.Time) context.Context {
	hctx, source := k.parent, k.parent
	if k.source != nil {
		source = k.source
	}
	for i, p := range k.parts {
		if !k.parted {
			p.gen, p.token = a.gen, a.token
		}
		c := p.h.client()
		next := c.grant(p.h, hctx, p.gen, p.token, k.lease, started)
		if next == nil {
			k.unrecord(hctx, i)
			return nil
		}
		hctx = next
		if k.parted || k.source != nil { // else grant set it: the same context
			entryFrom(hctx, c, p.h.key.id).parent = source
		}
		c.keepPresence()
	}
	return hctx
}

// unrecord ends the entries that grant recorded, in hctx, for the first n
// parts before a later part's Client refused its own: a new hold's
// generation ends, a re-entered one only loses the entry just added.
func (k *lockCall) unrecord(hctx context.Context, n int) {
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
// Client, for a partedScheme, so that every Lost or Released of a part has
// its Acquired.
func (k *lockCall) reportAcquired(ctx context.Context, start time.Time, attempts int, contended, reentry bool) {
	if !k.parted {
		k.c.emitAcquired(ctx, k.s, start, attempts, contended, reentry, k.parts[0].h.token)
		return
	}
	for _, p := range k.parts {
		p.h.client().emitAcquired(ctx, p.h.scheme, start, attempts, contended, reentry, p.h.token)
	}
}

// unlockWith is Unlock for every lock type: it ends exactly the entry of the
// hold context it is given — one per record for a partedScheme.
func unlockWith(ctx context.Context, s scheme) error {
	recs := records(s)
	for _, r := range recs {
		if c := r.client(); c == nil {
			return errNilClient
		} else if c.err != nil {
			return c.err
		}
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	o := ownerFrom(ctx)
	if o == nil {
		return fmt.Errorf("%w: the context carries no owner; pass the context Lock returned", ErrNotHeld)
	}
	k := unlockCall{s: s, c: s.client(), parted: isParted(s), parts: make([]part, len(recs))}
	for i, r := range recs {
		e := entryFrom(ctx, r.client(), r.holdID())
		if e == nil || e.h.key.owner != o.field(r.client()) {
			return fmt.Errorf("%w: the context is not a hold context of this lock; pass the context Lock returned", ErrNotHeld)
		}
		k.parts[i].e, k.parts[i].h = e, e.h
	}
	// Counted as a user only once every record is found: an early return
	// above must leave no record pinned.
	for _, p := range k.parts {
		p.h.client().holds.use(p.h)
	}
	// An Unlock must run, so it never gives up; but its caller waits no
	// longer than the unlock timeout, for the semaphores or the release.
	taken, err := serialiseBy(context.Background(), k.parts, time.Now().Add(k.c.opts.unlockTimeout))
	if err != nil {
		return k.unlockLater(ctx, taken)
	}
	return k.finish(ctx, taken)
}

// finish is the rest of an Unlock once it holds the records' semaphores
// (taken of them): release, report, settle, leave.
func (k *unlockCall) finish(ctx context.Context, taken int) error {
	errs, live := k.prepare()
	if live == 0 && len(errs) == 0 {
		leave(k.parts, taken)
		return ErrNotHeld
	}
	var late <-chan reply[struct{}]
	var lateParts []part
	if live > 0 {
		late, lateParts = k.releaseBounded(ctx)
		k.report(ctx)
		errs = append(errs, k.settle()...)
	}
	if late != nil {
		k.finishLate(late, lateParts, taken)
	} else {
		leave(k.parts, taken)
	}
	return k.result(errs)
}

// An unlockCall is one Unlock in the engine.
type unlockCall struct {
	s      scheme
	c      *Client // s.client(): where the call is reported
	parted bool    // s is a partedScheme
	parts  []part
}

// prepare marks the parts whose entry is live and sets their requests. An
// entry that ended already is left alone; it adds an error if it was lost.
func (k *unlockCall) prepare() (errs []error, live int) {
	for i := range k.parts {
		p := &k.parts[i]
		r := &p.h.client().holds
		r.mu.Lock()
		if cause := p.e.ended; cause != nil {
			r.mu.Unlock()
			if lost(cause) {
				errs = append(errs, k.partErr(p, cause))
			}
			continue
		}
		p.live = true
		p.req = releaseReq{owner: p.h.key.owner, gen: p.e.gen, final: len(p.h.entries) == 1}
		p.h.releasing = p.req.final
		p.until, p.since = p.h.expiresAt, p.h.since
		p.req.until = p.until
		r.mu.Unlock()
		live++
	}
	return errs, live
}

// report tells the Observer how the release went: one event per live part
// (on its own Client), as reportAcquired.
func (k *unlockCall) report(ctx context.Context) {
	for _, p := range k.parts {
		switch {
		case !p.live:
		case p.err != nil:
			p.h.client().emitReleased(ctx, p.h, p.since, p.req.final, p.err)
		case p.out != notHeld:
			p.h.client().emitReleased(ctx, p.h, p.since, p.out == released, nil)
		}
	}
}

// settle ends the live parts' entries as their releases tell, and returns
// the parts' failures.
func (k *unlockCall) settle() []error {
	var errs []error
	for i := range k.parts {
		p := &k.parts[i]
		if !p.live {
			continue
		}
		c := p.h.client()
		switch {
		case p.err == errUnlockTimeout:
			// Retried once the release in flight returns (finishLate).
			c.unlockFailed(p.e, p.req, p.until, false)
			errs = append(errs, k.partErr(p, c.notConfirmed(nil)))
		case p.err != nil:
			c.observe(p.err)
			c.unlockFailed(p.e, p.req, p.until, true)
			errs = append(errs, k.partErr(p, c.notConfirmed(p.err)))
		case p.out == released:
			c.end(p.h, p.req.gen, ErrUnlocked)
		case p.out == stillHeld:
			c.holds.mu.Lock()
			c.endEntryLocked(p.e, ErrUnlocked)
			c.holds.mu.Unlock()
		default:
			cause := fmt.Errorf("%w: the hold was gone when Unlock ran", ErrLockLost)
			c.end(p.h, p.req.gen, cause)
			errs = append(errs, k.partErr(p, cause))
		}
	}
	return errs
}

// partErr names the part err is about, for a partedScheme.
func (k *unlockCall) partErr(p *part, err error) error {
	if !k.parted {
		return err
	}
	return fmt.Errorf("%s part %q: %w", k.s.info().Kind, p.h.scheme.info().Name, err)
}

// result is the error Unlock returns for the parts' failures: a
// partedScheme's joined (errors.Join), another's as it is (it has one part).
func (k *unlockCall) result(errs []error) error {
	if k.parted || len(errs) != 1 {
		return errors.Join(errs...)
	}
	return errs[0]
}

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
	c.retryInBackground(func(ctx context.Context) error {
		_, err := s.release(ctx, req)
		return err
	}, until)
}

// leaveQueue runs call, a handing scheme's abandon script for a waiter that
// gave up: it leaves the queue and releases a grant that crossed its leaving.
// A failure is retried in the background: a grant nobody uses would block
// the lock for a lease (and an RWLock writer's claim hold readers up for the
// waiter timeout).
func (c *Client) leaveQueue(ctx context.Context, call scriptCall) {
	run := func(ctx context.Context) error { return call.run(ctx, c.rdb).Err() }
	if err := run(ctx); err != nil && transient(err) {
		c.retryInBackground(run, time.Now().Add(c.opts.watchdogLease))
	}
}

// retryInBackground runs op until it succeeds, fails for good, the Client
// closes or until has passed. Once Close has stopped the background work
// (its wait for these goroutines has begun), op runs once, here, instead:
// a clean-up asked for by a call that ends after Close (a Lock whose grant
// came back late, an Unlock) still gets its attempt, and Close never waits
// for more than the attempts already running.
func (c *Client) retryInBackground(op func(context.Context) error, until time.Time) {
	started := c.goBackground(func() {
		for n := 1; ; n++ {
			err := op(context.Background())
			if err == nil || !transient(err) {
				return
			}
			c.observe(err)
			pause := faultBackoff(n)
			if time.Until(until) < pause {
				return
			}
			select {
			case <-c.closing:
				return
			case <-time.After(pause):
			}
		}
	})
	if !started {
		if err := op(context.Background()); err != nil {
			c.observe(err)
		}
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
	defer func() {
		if uerr := unlock(hctx); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(hctx)
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
		return 0, ErrNotHeld
	}
	gen, token, _ := c.holds.find(s.holdID(), o.field(c))
	if gen == "" {
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
