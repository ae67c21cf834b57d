package relock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// RedLock is Redlock over independent masters, one Client each, held while
// a majority (Quorum) granted it; it rests on timing and durable masters.
type RedLock struct {
	nodes  []*Lock
	home   *Client
	id     string
	quorum int
	cfg    redConfig
	err    error
}

type redConfig struct {
	nodeTimeout time.Duration
	drift       float64
	retryDelay  time.Duration
}

// Defaults of a RedLock's options.
const (
	defaultNodeTimeout    = 100 * time.Millisecond
	defaultClockDrift     = 0.01
	defaultRedRetryDelay  = 200 * time.Millisecond
	redDriftFloor         = 2 * time.Millisecond
	redOwnerSuffix        = ":red"
	redLockRegistryPrefix = "redlock\x00"
)

// A RedLockOption configures a RedLock; an invalid one fails every call.
type RedLockOption func(*redConfig) error

// WithNodeTimeout sets how long a master may take to answer (100 ms).
func WithNodeTimeout(d time.Duration) RedLockOption {
	return func(c *redConfig) error {
		if err := checkDuration("node timeout", d); err != nil {
			return err
		}
		c.nodeTimeout = d
		return nil
	}
}

// WithClockDrift sets the drift off a hold's validity (0.01 of the lease).
func WithClockDrift(factor float64) RedLockOption {
	return func(c *redConfig) error {
		if !(factor >= 0 && factor < 0.5) {
			return fmt.Errorf("%w: clock drift factor %v is outside [0, 0.5)", ErrInvalidArgument, factor)
		}
		c.drift = factor
		return nil
	}
}

// WithRetryDelay sets the mean delay between failed rounds (200 ms).
func WithRetryDelay(d time.Duration) RedLockOption {
	return func(c *redConfig) error {
		if err := checkDuration("retry delay", d); err != nil {
			return err
		}
		c.retryDelay = d
		return nil
	}
}

// NewRedLock returns the RedLock called name over clients, one per master.
func NewRedLock(name string, clients []*Client, opts ...RedLockOption) *RedLock {
	r := &RedLock{cfg: redConfig{nodeTimeout: defaultNodeTimeout, drift: defaultClockDrift, retryDelay: defaultRedRetryDelay}}
	r.err = r.init(name, clients, opts)
	return r
}

func (r *RedLock) init(name string, clients []*Client, opts []RedLockOption) error {
	if len(clients) == 0 {
		return fmt.Errorf("%w: a RedLock needs at least one Client", ErrInvalidArgument)
	}
	for _, opt := range opts {
		if opt == nil {
			return fmt.Errorf("%w: nil RedLock option", ErrInvalidArgument)
		}
		if err := opt(&r.cfg); err != nil {
			return err
		}
	}
	ids := make([]string, len(clients))
	for i, c := range clients {
		if c == nil {
			return fmt.Errorf("%w: Client %d of the RedLock is nil", ErrInvalidArgument, i)
		}
		if slices.Contains(clients[:i], c) {
			return fmt.Errorf("%w: Client %d of the RedLock is given twice", ErrInvalidArgument, i)
		}
		l := c.Lock(name)
		if l.err != nil {
			return l.err
		}
		r.nodes = append(r.nodes, l)
		ids[i] = c.id
	}
	r.home = clients[0]
	r.quorum = len(clients)/2 + 1
	slices.Sort(ids)
	r.id = redLockRegistryPrefix + r.nodes[0].keys.hash + "\x00" + strings.Join(ids, ",")
	return nil
}

// Name returns the lock's name.
func (r *RedLock) Name() string {
	if len(r.nodes) == 0 {
		return ""
	}
	return r.nodes[0].Name()
}

// Quorum returns how many masters must grant the lock: N/2+1.
func (r *RedLock) Quorum() int { return r.quorum }

// Lock is Lock.Lock on a majority of the masters.
func (r *RedLock) Lock(ctx context.Context) (context.Context, error) {
	return r.TryLock(ctx, WaitForever, 0)
}

// TryLock is Lock.TryLock on a majority of the masters.
func (r *RedLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	if r.err != nil {
		return ctx, r.err
	}
	return lockWith(ctx, soleOf(redScheme{r}), wait, lease)
}

// Unlock is Lock.Unlock on every master: nil when a majority confirmed,
// ErrLockLost when a majority had lost it, else ErrNotConfirmed (kinds.md).
func (r *RedLock) Unlock(ctx context.Context) error {
	if r.err != nil {
		return r.err
	}
	return unlockWith(ctx, soleOf(redScheme{r}))
}

// Token is Lock.Token, agreed by a majority of the masters.
func (r *RedLock) Token(ctx context.Context) (int64, error) {
	if r.err != nil {
		return 0, r.err
	}
	return tokenOf(ctx, redScheme{r})
}

// Validity returns how long ctx's hold stays valid, as this process sees it.
func (r *RedLock) Validity(ctx context.Context) (time.Duration, error) {
	if r.err != nil {
		return 0, r.err
	}
	if ctx == nil {
		return 0, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	o := ownerFrom(ctx)
	if o == nil {
		return 0, errNoOwner("Lock")
	}
	gen, _, until := r.home.holds.find(r.id, o.field(r.home))
	if gen == "" {
		return 0, ErrNotHeld
	}
	return max(time.Until(until), 0), nil
}

// ForceUnlock frees the lock on every master and reports how many had it.
func (r *RedLock) ForceUnlock(ctx context.Context) (int, error) {
	return r.forceUnlock(ctx, ForceGuard{})
}

// ForceUnlockIf is Lock.ForceUnlockIf on each master, by g.Owner (Token 0).
func (r *RedLock) ForceUnlockIf(ctx context.Context, g ForceGuard) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if g.Token != 0 {
		return 0, fmt.Errorf("%w: a RedLock's masters may record one hold at different tokens: guard it by its owner", ErrInvalidArgument)
	}
	if err := g.check(true); err != nil {
		return 0, err
	}
	return r.forceUnlock(ctx, g)
}

// forceUnlock runs the force release guarded by g (zero: none) on every
// master, ends this Client's holds it removed, and reports how many masters
// it freed and, when a master refused, who holds it there.
func (r *RedLock) forceUnlock(ctx context.Context, g ForceGuard) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if err := r.home.usable(); err != nil {
		return 0, err
	}
	if ctx == nil {
		return 0, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	res, errs := fanOut(r, context.WithoutCancel(ctx), func(ctx context.Context, l *Lock) ([]string, error) {
		return l.c.eval(ctx, "force unlock", lockForceReleaseCall(l.c, l.keys, g)).StringSlice()
	})
	var gens []string
	var refused *HolderChangedError
	freed, failed := 0, 0
	for i := range res {
		switch no := r.nodes[i].refusal(g, res[i]); {
		case errs[i] != nil:
			failed++
		case no != nil:
			refused = refused.join(no)
		case len(res[i]) > 0:
			freed++
			gens = append(gens, res[i]...)
		}
	}
	r.home.endForced(r.id, gens, ErrForceUnlocked)
	switch {
	case refused != nil:
		r.home.nameHolders(ctx, refused)
		return freed, refused
	case failed == len(res):
		return 0, fmt.Errorf("relock: redlock force unlock: %w", errors.Join(errs...))
	}
	return freed, nil
}

func (r *RedLock) driftFor(lease time.Duration) time.Duration {
	return redScheme{r}.traits().drift(lease)
}

func (r *RedLock) jitter() time.Duration {
	d := r.cfg.retryDelay
	return d/2 + rand.N(d)
}

var errNodeTimeout = fmt.Errorf("%w: no answer within the node timeout", ErrUnavailable)

// fanOut runs f on every master in parallel and waits for each at most the
// node timeout: a master that has not answered by then counts as failed, and
// its call finishes in the background. go-redis does not stop a read on a
// context deadline unless ContextTimeoutEnabled is set, hence the select.
// A master whose Client has closed still takes part in releases (as Unlock
// works after Close); f refuses it where the call would start or extend a
// hold.
func fanOut[T any](r *RedLock, ctx context.Context, f func(context.Context, *Lock) (T, error)) ([]T, []error) {
	type result struct {
		i   int
		v   T
		err error
	}
	n := len(r.nodes)
	ch := make(chan result, n) // buffered: a late answer never blocks
	for i, l := range r.nodes {
		go func() {
			nctx, cancel := context.WithTimeout(ctx, r.cfg.nodeTimeout)
			defer cancel()
			if err := l.c.queryable(); err != nil {
				ch <- result{i: i, err: err}
				return
			}
			v, err := f(nctx, l)
			ch <- result{i: i, v: v, err: err}
		}()
	}
	vals := make([]T, n)
	errs := make([]error, n)
	answered := make([]bool, n)
	timer := time.NewTimer(r.cfg.nodeTimeout)
	defer timer.Stop()
collect:
	for range n {
		select {
		case res := <-ch:
			vals[res.i], errs[res.i], answered[res.i] = res.v, res.err, true
		case <-timer.C:
			break collect
		}
	}
	for i := range n {
		if !answered[i] {
			errs[i] = errNodeTimeout
		}
		if errs[i] != nil {
			// A master that did not answer is Redis unavailable to the
			// caller, as for the other lock types.
			errs[i] = unavailable(errs[i])
			errs[i] = fmt.Errorf("master %s: %w", deploymentID(r.nodes[i].c.rdb), errs[i])
		}
	}
	return vals, errs
}

// mayStillRun reports whether a master's request of a round may run after
// the round: errs has an error of unknown outcome, or a master's silence.
func mayStillRun(errs []error) bool {
	for _, err := range errs {
		if err != nil && (outcomeUnknown(err) || errors.Is(err, errNodeTimeout)) {
			return true
		}
	}
	return false
}

// redScheme runs a RedLock's rounds; lockWith and unlockWith do the rest.
type redScheme struct{ r *RedLock }

func (s redScheme) client() *Client { return s.r.home }
func (s redScheme) holdID() string  { return s.r.id }

func (s redScheme) info() LockInfo { return LockInfo{Name: s.r.Name(), Kind: KindRedLock} }

// acquire is one Redlock round: every master in parallel, then the quorum
// and validity check, then (new holds, drifted tokens only) the token
// round. A failed round is undone on every master: the undo names the
// round's generation, so it can never remove a later grant.
func (s redScheme) acquire(ctx context.Context, req acquireReq) (attempt, error) {
	r := s.r
	field := req.owner + redOwnerSuffix
	fencing := r.home.opts.fencing
	start := time.Now()
	replies, errs := fanOut(r, ctx, func(ctx context.Context, l *Lock) ([]int64, error) {
		if err := l.c.usable(); err != nil {
			return nil, err // a closed master's Client takes part in no new round
		}
		// The home Client decides fencing; no master queues a waiter (no
		// single master can hand a RedLock over). A grant that did not reach
		// the replicas its master's Client asks for (WithReplicas) does not
		// count: a failover there could lose it.
		out, repl := l.c.evalReplicated(ctx, "acquire", lockAcquireCall(r.home, l.keys, field, req, false))
		res, err := out.Int64Slice()
		switch {
		case err == nil && len(res) < 2:
			err = fmt.Errorf("acquire script returned %d values, want 2 or 3", len(res))
		case err == nil && res[0] == 1 && repl != nil:
			err = repl
		}
		return res, err
	})
	v := r.count(replies, errs)
	gen := cmp.Or(req.gen, req.op)
	drift := r.driftFor(req.lease)
	if len(v.granted) >= r.quorum {
		ok := true
		if req.gen == "" && fencing {
			ok = r.spreadToken(ctx, field, gen, v.granted, replies, v.token, &v.failures)
		}
		if ok && req.lease-time.Since(start)-drift > 0 {
			return attempt{outcome: acquired, token: v.token}, nil
		}
		if ok {
			v.failures = append(v.failures, fmt.Errorf("the round took %v, longer than the lease %v less drift", time.Since(start), req.lease))
		}
	}
	// Undo this round everywhere: a master that granted, or that may have
	// executed the request without answering in time, lets this round's
	// grant go; the others answer "not held" and change nothing.
	// A new hold's round that a master may still run (it did not answer)
	// is voided there too (scripts/void_common.lua).
	void := req.gen == "" && mayStillRun(errs)
	s.undo(ctx, releaseReq{owner: req.owner, op: r.home.newOp(), gen: gen, final: req.gen == "", void: void}, start.Add(req.lease))
	cause := fmt.Errorf("%d of %d masters granted, %d needed: %w", len(v.granted), len(r.nodes), r.quorum, errors.Join(v.failures...))
	if req.gen != "" {
		if v.lost > len(r.nodes)-r.quorum {
			return attempt{outcome: mismatch}, nil
		}
		return attempt{}, fmt.Errorf("relock: redlock re-entry: %w", cause)
	}
	a := attempt{outcome: busy, retryIn: r.jitter()}
	a.cause = cause
	return a, nil
}

// undo releases req, a failed round's grant, on every master (see
// releaseEverywhere).
func (s redScheme) undo(ctx context.Context, req releaseReq, until time.Time) {
	s.releaseEverywhere(ctx, req, until)
}

// releaseEverywhere runs req on every master. A master that does not
// confirm it (an error, or no answer within the node timeout) may keep the
// hold with nobody to use it, so its own Client's retrier sends the same
// request there in the background (see Client.retryRelease; a replay is
// recognised) until it is confirmed or until, when the hold's lease has run
// out anyway.
func (s redScheme) releaseEverywhere(ctx context.Context, req releaseReq, until time.Time) ([]int64, []error) {
	res, errs := fanOut(s.r, ctx, s.releaseOn(req))
	for i, err := range errs {
		if err != nil {
			s.retryOn(i, req, until)
		}
	}
	return res, errs
}

// releaseInBackground is how the engine retries a RedLock release whose
// outcome it does not know: each master's retrier sends it there, so that
// no retry of the whole release asks a dead master once more per release
// waiting. A master that confirmed it already answers the replay at once.
func (s redScheme) releaseInBackground(req releaseReq, until time.Time) {
	for i := range s.r.nodes {
		s.retryOn(i, req, until)
	}
}

// retryOn has master i's Client retry req there (see Client.retryRelease).
func (s redScheme) retryOn(i int, req releaseReq, until time.Time) {
	l := s.r.nodes[i]
	release := s.releaseOn(req)
	l.c.retryRelease(l.keys.hash+"\x00"+req.op, func(ctx context.Context) error {
		_, err := release(ctx, l)
		return err
	}, until)
}

// releaseOn is req's release on one master.
func (s redScheme) releaseOn(req releaseReq) func(context.Context, *Lock) (int64, error) {
	field := req.owner + redOwnerSuffix
	return func(ctx context.Context, l *Lock) (int64, error) {
		return l.c.eval(ctx, "release", lockReleaseCall(l.c, l.keys, field, req)).Int64()
	}
}

// redVotes is what the masters answered to one round's acquire.
type redVotes struct {
	granted  []int   // the masters that granted
	token    int64   // the largest token among them
	lost     int     // how many no longer had the caller's generation
	failures []error // why the others did not grant
}

// count reads a round's replies (see fanOut).
func (r *RedLock) count(replies [][]int64, errs []error) redVotes {
	var v redVotes
	for i, err := range errs {
		if err != nil {
			v.failures = append(v.failures, err)
			continue
		}
		switch replies[i][0] {
		case 1:
			v.granted = append(v.granted, i)
			v.token = max(v.token, replies[i][1])
		case 0:
			v.failures = append(v.failures, fmt.Errorf("master %s: held by another owner", deploymentID(r.nodes[i].c.rdb)))
		default:
			v.lost++
			v.failures = append(v.failures, fmt.Errorf("master %s: %w", deploymentID(r.nodes[i].c.rdb), ErrLockLost))
		}
	}
	return v
}

// spreadToken makes sure a majority of the masters has its counter at token
// or above before token is handed out: granting masters whose counter is
// below it are raised, in parallel. It reports whether a majority does.
func (r *RedLock) spreadToken(ctx context.Context, field, gen string, granted []int, replies [][]int64, token int64, failures *[]error) bool {
	atMax := 0
	lag := make(map[*Lock]bool)
	for _, i := range granted {
		if replies[i][1] == token {
			atMax++
		} else {
			lag[r.nodes[i]] = true
		}
	}
	if atMax >= r.quorum {
		return true // the common case: counters agree, no second round
	}
	res, errs := fanOut(r, ctx, func(ctx context.Context, l *Lock) (int64, error) {
		if !lag[l] {
			return 0, nil
		}
		return l.c.eval(ctx, "fence", redFenceCall(l.keys.hash, gen, token)).Int64()
	})
	for i, l := range r.nodes {
		if !lag[l] {
			continue
		}
		if errs[i] != nil {
			*failures = append(*failures, fmt.Errorf("raising the token: %w", errs[i]))
		} else if res[i] == 1 {
			atMax++
		}
	}
	return atMax >= r.quorum
}

// release ends the hold on every master in parallel, waiting for each at
// most the node timeout. The lock counts as released when a majority
// confirmed it; as lost when fewer than a majority still had it, whatever
// the others said; otherwise the outcome is unknown (an error: the engine
// retries it in the background, through releaseInBackground).
func (s redScheme) release(ctx context.Context, req releaseReq) (releaseOutcome, error) {
	r := s.r
	until := req.until
	if until.IsZero() {
		until = time.Now().Add(r.home.leaseFor(0))
	}
	res, errs := s.releaseEverywhere(ctx, req, until)
	ok, lost := 0, 0
	var failures []error
	for i := range res {
		switch {
		case errs[i] != nil:
			failures = append(failures, errs[i])
		case res[i] == -1:
			lost++
		default:
			ok++
		}
	}
	switch {
	case lost > len(r.nodes)-r.quorum:
		return notHeld, nil
	case ok >= r.quorum && req.final:
		return released, nil
	case ok >= r.quorum:
		return stillHeld, nil
	}
	return 0, fmt.Errorf("relock: redlock release confirmed by %d of %d masters, %d needed: %w",
		ok, len(r.nodes), r.quorum, errors.Join(failures...))
}

// renewal renews (or with lease 0 checks) the hold on every master in
// parallel: 1 while a majority still has it within the validity, 0 once a
// majority no longer can, an error (retried by the watchdog until the
// validity runs out) otherwise.
func (s redScheme) renewal(owner, gen string, lease time.Duration) renewal {
	r := s.r
	return renewal{run: func(ctx context.Context) (int64, error) {
		start := time.Now()
		res, errs := fanOut(r, ctx, func(ctx context.Context, l *Lock) (int64, error) {
			if err := l.c.usable(); err != nil {
				return 0, err // a closed Client renews nothing
			}
			v, err := l.c.eval(ctx, "renew", lockRenewCall(l.keys.hash, gen, lease)).Int64Slice()
			if err == nil && len(v) != 1 {
				err = fmt.Errorf("renewal script returned %d values, want 1", len(v))
			}
			if err != nil {
				return 0, err
			}
			return v[0], nil
		})
		renewed, gone := 0, 0
		var failures []error
		for i := range res {
			switch {
			case errs[i] != nil:
				failures = append(failures, errs[i])
			case res[i] == 1:
				renewed++
			default:
				gone++
			}
		}
		switch {
		case renewed >= r.quorum && (lease == 0 || time.Since(start) < lease-r.driftFor(lease)):
			return 1, nil
		case gone > len(r.nodes)-r.quorum:
			return 0, nil
		}
		return 0, fmt.Errorf("relock: redlock renewal reached %d of %d masters, %d needed: %w",
			renewed, len(r.nodes), r.quorum, errors.Join(failures...))
	}}
}

// traits: no master can hand a RedLock over, so its waiters do not queue
// (they retry after a jittered delay); a hold counts as gone driftFor(lease)
// before its lease ends; and one round may take at most the acquire and the
// undo or token phase, each bounded by the node timeout, which the engine
// lets it take rather than cut it at the end of TryLock's wait; its
// requests run on every master's Client (otherClients).
func (s redScheme) traits() traits {
	return traits{driftRate: s.r.cfg.drift, driftFloor: redDriftFloor, attemptBound: 3 * s.r.cfg.nodeTimeout, otherClients: true}
}
