package relock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A scheme is what one lock type contributes to the shared machinery: its
// scripts, run for one owner. Everything else — owners, contexts, waiting,
// the watchdog, replay safety — is common to every lock type.
type scheme interface {
	client() *Client
	// holdID names the lock (and mode) in the Client's registry of holds.
	holdID() string
	// acquire runs the acquire script once for owner, who holds `held` already
	// by the Client's account, with the given lease.
	acquire(ctx context.Context, owner string, held int, lease time.Duration) (attempt, error)
	// release runs the release script once for owner, who holds `held`.
	release(ctx context.Context, owner string, held int) (releaseOutcome, error)
	// renewal is the watchdog's work item for owner's hold.
	renewal(owner string) renewal
	// abandon is called when a wait for the lock ends without it, so that
	// types that register waiters in Redis (FairLock) can take them out.
	abandon(ctx context.Context, owner string)
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
	mismatch                // this owner's count in Redis is not the Client's: lost, or held under WithOwner elsewhere
)

// attempt is the result of one run of an acquire script.
type attempt struct {
	outcome outcome
	token   int64         // acquired: fencing token of a new hold
	held    int           // mismatch: the owner's count as Redis has it
	retryIn time.Duration // busy: the remaining lease of the holder (<= 0: unknown)
	channel string        // busy: where the holder's release is announced ("" to poll at retryIn)
	subs    *subscriber   // busy: which Client carries channel (nil: the scheme's)
	cause   error         // busy: why, when it is not simply another holder (joined to ErrNotObtained)
	drift   time.Duration // acquired: how much sooner than its lease the hold must count as gone (RedLock's clock drift)
	// acquired with WithReplicas: why the grant did not reach the replicas
	// (nil: it did). lockWith then undoes the grant.
	replication error
}

type releaseOutcome int

const (
	released  releaseOutcome = iota // the lock is free
	stillHeld                       // one hold released, the owner keeps the rest
	notHeld                         // the owner did not hold what the Client believed: lost
)

// renewal is one hold's share of a watchdog batch. Items with the same script
// go out in one call: KEYS are the items' keys one after the other, ARGV[1]
// is the lease in milliseconds and the items' args follow, in the same order.
// The script returns one integer per item: 1 renewed, 0 gone.
type renewal struct {
	script *redis.Script
	keys   []string
	args   []any
	// run, when set, renews the hold by itself instead of joining a batch:
	// for a hold spread over several deployments (RedLock), which no single
	// script call can reach. It returns 1 renewed, 0 gone, like a script.
	run func(ctx context.Context, lease time.Duration) (int64, error)
}

// hold is the Client's record of one owner's holds on one lock.
type hold struct {
	key    holdKey
	scheme scheme
	// sem serialises the Redis operations of this owner on this lock, which
	// makes the Client's count exact and the scripts' replay check sound.
	sem chan struct{}

	// Guarded by registry.mu.
	users     int // goroutines between enter and exit
	count     int
	token     int64
	cancels   []context.CancelCauseFunc // one per hold context, oldest first
	watched   bool
	releasing bool // a final release is in flight: a renewal miss is expected
	// expiresAt is when the lease ends by this Client's clock (measured from
	// before the script was sent, so never later than Redis's); expiry fires
	// then and ends the hold unless a renewal or re-entry moved it.
	expiresAt time.Time
	expiry    *time.Timer
	adopted   bool          // count taken over from Redis (WithOwner): next grant starts the hold
	drift     time.Duration // how much sooner than its lease the hold counts as gone (RedLock)
}

type holdKey struct{ id, owner string }

type registry struct {
	mu sync.Mutex
	m  map[holdKey]*hold
}

func (r *registry) init() { r.m = make(map[holdKey]*hold) }

// enter returns the record for (s, owner), creating it, and counts the caller
// as its user until exit.
func (r *registry) enter(s scheme, owner string) *hold {
	k := holdKey{s.holdID(), owner}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.m[k]
	if h == nil {
		h = &hold{key: k, scheme: s, sem: make(chan struct{}, 1)}
		r.m[k] = h
	}
	h.users++
	return h
}

// lookup is enter for a record that must exist already.
func (r *registry) lookup(id, owner string) *hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.m[holdKey{id, owner}]
	if h != nil {
		h.users++
	}
	return h
}

func (r *registry) exit(h *hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h.users--
	r.dropIfIdle(h)
}

func (r *registry) dropIfIdle(h *hold) {
	if h.users == 0 && h.count == 0 && r.m[h.key] == h {
		delete(r.m, h.key)
	}
}

func (r *registry) held(h *hold) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return h.count
}

// validUntil returns until when owner's hold on id is valid as far as the
// Client knows: its last renewal or its lease, less the scheme's drift.
func (r *registry) validUntil(id, owner string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.m[holdKey{id, owner}]
	switch {
	case h == nil || h.count == 0:
		return time.Time{}, false
	}
	return h.expiresAt, true
}

func (r *registry) find(id, owner string) (count int, token int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.m[holdKey{id, owner}]; h != nil {
		return h.count, h.token
	}
	return 0, 0
}

// grant records one more hold and returns its context. started is when the
// acquire script was sent: the lease runs from no earlier than that.
func (c *Client) grant(h *hold, parent context.Context, a attempt, lease time.Duration, started time.Time) context.Context {
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	first := h.count == 0 || h.adopted
	h.adopted = false
	h.count++
	ctx, cancel := context.WithCancelCause(parent)
	h.cancels = append(h.cancels, cancel)
	if first {
		h.token = a.token
		h.drift = a.drift
		h.watched = lease == 0
		if h.watched {
			c.dog.watch(h)
		}
	}
	if lease == 0 {
		lease = c.opts.watchdogLease
	}
	c.extendLocked(h, started.Add(safeLease(lease)-h.drift))
	return ctx
}

// extendLocked moves the hold's local lease end to until, if that is later:
// the lease of a leased hold, or for a watched one the lease its last
// successful renewal bought. The watched case matters when a renewal hangs
// (a paused server, a partition): the call may not return before Redis lets
// the lock go, and the holder must not believe past that. Called with the
// registry lock held.
func (c *Client) extendLocked(h *hold, until time.Time) {
	if !until.After(h.expiresAt) {
		return
	}
	h.expiresAt = until
	if h.expiry == nil {
		h.expiry = time.AfterFunc(time.Until(until), func() { c.expire(h) })
	} else {
		h.expiry.Reset(time.Until(until))
	}
}

// safeLease is how long after sending the script that set it a holder may
// count on a lease: less a margin, as Redlock does, for the drift between the
// client's clock and the server's and for the timer firing late.
func safeLease(lease time.Duration) time.Duration {
	return lease - min(lease/100+2*time.Millisecond, lease/4)
}

// expire ends a hold whose lease has run out: a leased one, or a watched one
// whose renewals failed until then.
func (c *Client) expire(h *hold) {
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.count == 0 || time.Now().Before(h.expiresAt) {
		return // already ended, or extended by a re-entry
	}
	c.endLocked(h, fmt.Errorf("%w: lease expired", ErrLockLost))
}

// end closes every hold of h with cause: all its contexts are cancelled and
// nothing renews it any more.
func (c *Client) end(h *hold, cause error) {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	c.endLocked(h, cause)
}

func (c *Client) endLocked(h *hold, cause error) {
	if h.count == 0 {
		return
	}
	h.count = 0
	h.releasing = false
	if h.expiry != nil {
		h.expiry.Stop()
		h.expiry = nil
		h.expiresAt = time.Time{}
	}
	if h.watched {
		h.watched = false
		c.dog.unwatch(h)
	}
	c.holds.dropIfIdle(h)
	// Signal last, so that a holder woken by Done sees the hold fully ended.
	cancels := h.cancels
	h.cancels = nil
	for _, cancel := range cancels {
		cancel(cause)
	}
}

// releaseOne records that one of several holds was released.
func (c *Client) releaseOne(h *hold) {
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.count <= 1 {
		c.endLocked(h, ErrUnlocked)
		return
	}
	h.count--
	last := len(h.cancels) - 1
	h.cancels[last](ErrUnlocked)
	h.cancels = h.cancels[:last]
}

func (c *Client) setReleasing(h *hold, on bool) {
	c.holds.mu.Lock()
	h.releasing = on
	c.holds.mu.Unlock()
}

// cancelAll cancels every open hold's context with cause, keeping the
// records so that Unlock can still release them.
func (r *registry) cancelAll(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.m {
		for _, cancel := range h.cancels {
			cancel(cause)
		}
	}
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
// re-entry, waiting and the hold's context.
func lockWith(ctx context.Context, s scheme, wait, lease time.Duration) (context.Context, error) {
	c := s.client()
	if err := c.usable(); err != nil {
		return nil, err
	}
	if err := checkLockArgs(ctx, wait, lease); err != nil {
		return nil, err
	}
	parent, o := withNewOwner(ctx)
	field := o.field(c)
	h := c.holds.enter(s, field)
	defer c.holds.exit(h)
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, notObtained(ctx)
	}
	defer func() { <-h.sem }()

	sendLease := lease
	if sendLease == 0 {
		sendLease = c.opts.watchdogLease
	}
	// Scripts run detached from ctx: a script cancelled in flight may still
	// have run, and a hold nobody knows of would be leaked until its lease.
	dctx := context.WithoutCancel(ctx)
	held := c.holds.held(h)
	var started time.Time
	try := func() (attempt, error) {
		started = time.Now()
		a, err := s.acquire(dctx, field, held, sendLease)
		if err == nil && a.outcome == mismatch && held == 0 && a.held > 0 {
			// Redis knows this owner already (a hold resumed with WithOwner):
			// adopt its count and re-enter.
			c.adopt(h, a.held)
			held = a.held
			started = time.Now()
			a, err = s.acquire(dctx, field, held, sendLease)
		}
		return a, err
	}
	var a attempt
	var err error
	if held > 0 {
		a, err = try() // re-entry never waits
	} else {
		a, err = c.wait(ctx, wait, queueOf(s), try)
	}
	if err != nil {
		if held == 0 {
			s.abandon(dctx, field)
		}
		return nil, err
	}
	switch a.outcome {
	case acquired:
		if a.replication != nil {
			c.ungrant(dctx, s, h, field, held)
			return nil, a.replication
		}
		return c.grant(h, parent, a, lease, started), nil
	case mismatch:
		c.end(h, ErrLockLost)
		return nil, fmt.Errorf("%w: Redis has this owner's count at %d, not %d", ErrLockLost, a.held, held)
	}
	return nil, fmt.Errorf("relock: unexpected acquire outcome %d", a.outcome)
}

// ungrant releases a grant that Redis made and the caller will not get
// (WithReplicas: it did not reach the replicas): the release script, told the
// owner holds one more than the Client's count, takes exactly that one back.
func (c *Client) ungrant(ctx context.Context, s scheme, h *hold, field string, held int) {
	if _, err := s.release(ctx, field, held+1); err != nil {
		c.log.Warn("relock: could not release an unreplicated grant; it ends with its lease", "lock", h.key.id, "err", err)
	}
}

// adopt takes over the count Redis has for an owner this Client did not know.
func (c *Client) adopt(h *hold, count int) {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	h.count = count
	h.adopted = true
	for range count {
		h.cancels = append(h.cancels, func(error) {})
	}
}

// unlockWith is Unlock for every lock type.
func unlockWith(ctx context.Context, s scheme) error {
	c := s.client()
	if c == nil {
		return fmt.Errorf("%w: nil *relock.Client", ErrInvalidArgument)
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
	field := o.field(c)
	h := c.holds.lookup(s.holdID(), field)
	if h == nil || c.holds.held(h) == 0 {
		if h != nil {
			c.holds.exit(h)
		}
		if errors.Is(context.Cause(ctx), ErrLockLost) {
			return context.Cause(ctx)
		}
		return ErrNotHeld
	}
	defer c.holds.exit(h)
	h.sem <- struct{}{}
	defer func() { <-h.sem }()
	held := c.holds.held(h)
	if held == 0 {
		return ErrNotHeld // released by another goroutine of the same owner meanwhile
	}
	if held == 1 {
		c.setReleasing(h, true)
	}
	// Unlock must work with a cancelled context, or locks would leak; the
	// call is bounded by the go-redis client's own timeouts.
	out, err := s.release(context.WithoutCancel(ctx), field, held)
	if err != nil {
		c.observe(err)
		c.setReleasing(h, false)
		return err
	}
	switch out {
	case released:
		c.end(h, ErrUnlocked)
	case stillHeld:
		c.releaseOne(h)
	default:
		c.end(h, ErrLockLost)
		return ErrLockLost
	}
	return nil
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
	count, token := c.holds.find(s.holdID(), o.field(c))
	if count == 0 {
		return 0, ErrNotHeld
	}
	return token, nil
}

func notObtained(ctx context.Context) error {
	return fmt.Errorf("%w: %w", ErrNotObtained, ctx.Err())
}

// endAll ends every hold this Client has on the lock with registry id.
func (c *Client) endAll(id string, cause error) {
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.m {
		if k.id == id {
			c.endLocked(h, cause)
		}
	}
}
