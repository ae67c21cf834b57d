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
	abandon(ctx context.Context, owner string)
}

// acquireReq is one run of an acquire script. op names this very request
// (a replay of it is recognised by it); gen is the generation the owner
// holds, "" for a new acquisition, whose generation will be op.
type acquireReq struct {
	owner, op, gen string
	lease          time.Duration
}

// releaseReq is one run of a release script; final says the Client has no
// other entry of this hold, so the lock is freed whatever the count says.
type releaseReq struct {
	owner, op, gen string
	final          bool
}

// A queuedScheme announces every release of its lock on one channel, so a
// newcomer may queue behind this process's waiters without trying first (see
// Client.wait). Types that wake waiters selectively (FairLock, RWLock) do not
// implement it.
type queuedScheme interface {
	releaseChannel() string
}

func queueOf(s scheme) string {
	if q, ok := s.(queuedScheme); ok {
		return q.releaseChannel()
	}
	return ""
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
	attemptExtras
}

// attemptExtras are the results of one feature each, which only some
// schemes return.
//
// TODO(issue 17): they belong to the schemes that need them, as a RedLock's
// drift (driftingScheme) and a MultiLock's per-part grants (part) do. Each
// is still read or set where this restructuring stayed out, the acquire and
// wait path being rewritten at the same time: subs by subscriber.follow
// (pubsub.go), cause by attempt.notObtained (wait.go), replication by
// lockScheme's and fairScheme's acquire. Then: cause can become the error of
// a busy attempt, replication a result of runAcquire kept by the scheme, and
// subs part of the channel's name (a channel of another Client).
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
		vals, err = sc.run(ctx, c.rdb).Int64Slice()
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

// evalAcquire is runAcquire with the call spelled out, for the acquire
// scripts that have no ...Call wrapper yet (see scripts.go).
//
// TODO(issue 17): drop it once lock_acquire and fair_acquire have theirs.
func (c *Client) evalAcquire(ctx context.Context, s *redis.Script, keys []string, args ...any) (vals []int64, repl error, err error) {
	return c.runAcquire(ctx, scriptCall{s, keys, args})
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
	c := s.client()
	if err := c.usable(); err != nil {
		return ctx, err
	}
	if err := checkLockArgs(ctx, wait, lease); err != nil {
		return ctx, err
	}
	parent, o := withNewOwner(ctx)
	field := o.field(c)
	h := c.holds.enter(s, field)
	defer c.holds.exit(h)
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx, notObtained(ctx)
	}
	defer func() { <-h.sem }()

	sendLease := c.leaseFor(lease)
	if gen := c.holds.generation(h); gen != "" {
		return c.reenter(ctx, parent, h, acquireReq{field, c.newOp(), gen, sendLease}, lease)
	}
	return c.acquireNew(ctx, parent, h, acquireReq{owner: field, lease: sendLease}, wait, lease)
}

// acquireNew takes a lock the owner does not hold, waiting up to wait.
func (c *Client) acquireNew(ctx, parent context.Context, h *hold, req acquireReq, wait, lease time.Duration) (context.Context, error) {
	s := h.scheme
	// Scripts run detached from ctx: a script cancelled in flight may still
	// have run, and a hold nobody knows of would be leaked until its lease.
	dctx := context.WithoutCancel(ctx)
	start := time.Now()
	var started time.Time
	unknown := "" // op of the last attempt whose outcome is unknown
	attempts := 0
	try := func() (attempt, error) {
		req.op = c.newOp()
		started = time.Now()
		attempts++
		a, err := s.acquire(dctx, req)
		switch {
		case err == nil:
			// A definite answer settles earlier unknown attempts too: a
			// grant of theirs would have been taken over by this one.
			unknown, a.gen = "", req.op
		case outcomeUnknown(err):
			unknown = req.op
		}
		return a, err
	}
	a, slept, err := c.wait(ctx, wait, queueOf(s), try)
	if err == nil && a.outcome != acquired {
		err = fmt.Errorf("relock: unexpected acquire outcome %d", a.outcome)
	}
	if err == nil && a.replication != nil {
		// Take the unreplicated grant back now, as documented; only if that
		// fails does the background release take over.
		if _, rerr := s.release(dctx, releaseReq{req.owner, c.newOp(), a.gen, true}); rerr != nil {
			unknown = a.gen
		}
		err = a.replication
	}
	if slept > 0 {
		c.emitWait(s, start, attempts, err)
	}
	if err != nil {
		s.abandon(dctx, req.owner)
		if unknown != "" {
			// The grant may exist in Redis with nobody to use it: free it in
			// the background instead of letting it block others for a lease.
			c.releaseInBackground(s, releaseReq{req.owner, c.newOp(), unknown, true}, started.Add(req.lease))
		}
		return ctx, err
	}
	hctx := c.grant(h, parent, a.gen, a.token, lease, started)
	c.keepPresence()
	c.emitAcquired(s, start, attempts, slept > 0 || attempts > 1, false, a.token)
	return hctx, nil
}

// reenter adds a hold for an owner that holds the lock already. It never
// waits. A re-entry whose reply is lost only raises the count in Redis,
// which is harmless: the owner's last Unlock frees the lock whatever the
// count says.
func (c *Client) reenter(ctx, parent context.Context, h *hold, req acquireReq, lease time.Duration) (context.Context, error) {
	s := h.scheme
	started := time.Now()
	a, err := s.acquire(context.WithoutCancel(ctx), req)
	if err != nil {
		c.observe(err)
		return ctx, err
	}
	switch a.outcome {
	case acquired:
		if a.replication != nil {
			return ctx, a.replication
		}
		hctx := c.grant(h, parent, req.gen, a.token, lease, started)
		c.emitAcquired(s, started, 1, false, true, a.token)
		return hctx, nil
	case mismatch:
		cause := fmt.Errorf("%w: the hold was gone when the owner re-entered", ErrLockLost)
		c.end(h, req.gen, cause)
		return ctx, cause
	}
	return ctx, fmt.Errorf("relock: unexpected acquire outcome %d", a.outcome)
}

// unlockWith is Unlock for every lock type: it ends exactly the entry of the
// hold context it is given.
func unlockWith(ctx context.Context, s scheme) error {
	c := s.client()
	if c == nil {
		return fmt.Errorf("%w: nil *relock.Client", ErrClientClosed)
	}
	if c.err != nil {
		return c.err
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	o := ownerFrom(ctx)
	if o == nil {
		return fmt.Errorf("%w: the context carries no owner; pass the context Lock returned", ErrNotHeld)
	}
	e := entryFrom(ctx, c, s.holdID())
	if e == nil || e.h.key.owner != o.field(c) {
		return fmt.Errorf("%w: the context is not a hold context of this lock; pass the context Lock returned", ErrNotHeld)
	}
	h := e.h
	c.holds.use(h)
	defer c.holds.exit(h)
	h.sem <- struct{}{}
	defer func() { <-h.sem }()

	r := &c.holds
	r.mu.Lock()
	if e.ended != nil {
		cause := e.ended
		r.mu.Unlock()
		if lost(cause) {
			return cause
		}
		return ErrNotHeld
	}
	req := releaseReq{owner: h.key.owner, op: c.newOp(), gen: e.gen, final: len(h.entries) == 1}
	h.releasing = req.final
	until, since := h.expiresAt, h.since
	r.mu.Unlock()

	// Unlock must work with a cancelled context, or locks would leak; the
	// call is bounded by the go-redis client's own timeouts.
	out, err := s.release(context.WithoutCancel(ctx), req)
	if err != nil {
		c.observe(err)
		c.unlockFailed(e, req, until)
		c.emitReleased(s, since, req.final, err)
		return fmt.Errorf("relock: unlock not confirmed, retrying in the background until the lease ends: %w", err)
	}
	if out != notHeld {
		c.emitReleased(s, since, out == released, nil)
	}
	switch out {
	case released:
		c.end(h, req.gen, ErrUnlocked)
	case stillHeld:
		r.mu.Lock()
		c.endEntryLocked(e, ErrUnlocked)
		r.mu.Unlock()
	default:
		cause := fmt.Errorf("%w: the hold was gone when Unlock ran", ErrLockLost)
		c.end(h, req.gen, cause)
		return cause
	}
	return nil
}

// unlockFailed ends an entry whose release could not be confirmed. The entry
// is over for the caller either way; a final release is retried in the
// background (the same request: its replay is recognised) until it is
// confirmed or the lease it would end has run out, and the hold is no longer
// renewed, so a failed Unlock never keeps a lock past its current lease.
func (c *Client) unlockFailed(e *entry, req releaseReq, until time.Time) {
	if !req.final {
		c.holds.mu.Lock()
		c.endEntryLocked(e, ErrUnlocked)
		c.holds.mu.Unlock()
		return
	}
	c.end(e.h, req.gen, ErrUnlocked)
	c.releaseInBackground(e.h.scheme, req, until)
}

// releaseInBackground retries req until Redis answers it or until, when
// the lease has run out and the lock is free anyway. It is how an Unlock that
// failed and an acquire of unknown outcome are cleaned up.
func (c *Client) releaseInBackground(s scheme, req releaseReq, until time.Time) {
	c.bg.Go(func() {
		for n := 1; ; n++ {
			_, err := s.release(context.Background(), req)
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
