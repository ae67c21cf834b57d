package relock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxPermits bounds a Semaphore's capacity: more is a bug in the caller.
const maxPermits = 1 << 30

// Semaphore is Redisson's RSemaphore, FIFO and strict; each Acquire is a hold
// without token, ErrInvalidArgument with a capacity other than the one used.
type Semaphore struct {
	base
	// tail keeps the force releases' answers, latch the releases' (see
	// sema_release.lua).
	hash, tail, latch, waitChannel string
	// sets are the sorted sets beside the hash: holds by deadline, the
	// queue, claims by deadline (see semaKeys).
	sets    [3]string
	permits atomic.Int64
	// setting serialises this value's SetPermits (writers) with its
	// acquire attempts (readers), each held over its script's round trip:
	// the capacity an attempt sends is then the one this value last set
	// in Redis, and no attempt records a capacity read before a change
	// of its own that ran on an unused semaphore (where nothing is kept).
	setting sync.RWMutex
}

// Semaphore returns the semaphore called name, with capacity permits.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	s := &Semaphore{}
	if s.init(c, name) {
		s.hash = s.ks.key("sema")
		s.tail = s.ks.key("sema:last")
		s.latch = s.ks.key("sema:r:last")
		s.sets = [3]string{s.ks.key("sema:d"), s.ks.key("sema:q"), s.ks.key("sema:c")}
		s.waitChannel = handOverChannel(s.hash, c.id)
	}
	if s.err == nil {
		s.err = checkPermits(permits)
	}
	s.permits.Store(int64(permits))
	return s
}

func checkPermits(n int) error {
	if n < 1 || n > maxPermits {
		return fmt.Errorf("%w: a semaphore has 1 to %d permits, not %d", ErrInvalidArgument, maxPermits, n)
	}
	return nil
}

// Key returns the Redis key of the semaphore's hash.
func (s *Semaphore) Key() string { return s.hash }

// Permits returns the capacity this Semaphore uses (as made, or last set).
func (s *Semaphore) Permits() int { return int(s.permits.Load()) }

// Acquire is Lock.Lock for n permits; ErrInvalidArgument for n outside
// 1..Permits(), or, at once, when SetPermits goes below n while it waits.
func (s *Semaphore) Acquire(ctx context.Context, n int) (context.Context, error) {
	return s.TryAcquire(ctx, n, WaitForever, 0)
}

// TryAcquire is Acquire with Lock.TryLock's wait and lease.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait, lease time.Duration) (context.Context, error) {
	if s.err != nil {
		return ctx, s.err
	}
	if max := s.Permits(); n < 1 || n > max {
		return ctx, fmt.Errorf("%w: asked for %d permits of a semaphore of %d", ErrInvalidArgument, n, max)
	}
	acq := &semaScheme{s: s, id: s.c.newOp(), n: n} // a pointer: one allocation, however often it is passed as a scheme
	hctx, err := s.tryLock(ctx, soleOf(acq), wait, lease)
	if err != nil {
		return ctx, err
	}
	return context.WithValue(hctx, semaKey{s.c, s.hash}, acq), nil
}

// semaKey finds, in a hold context, the acquisition it stands for.
type semaKey struct {
	c    *Client
	hash string
}

// Release is Lock.Unlock for the permits of the Acquire that returned hctx.
func (s *Semaphore) Release(hctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	if hctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	acq, ok := hctx.Value(semaKey{s.c, s.hash}).(*semaScheme)
	if !ok && ownerFrom(hctx) == nil {
		return errNoOwner("Acquire")
	}
	if !ok {
		return fmt.Errorf("%w: the context is not a hold context of this semaphore; pass the context Acquire returned", ErrNotHeld)
	}
	return s.unlock(hctx, soleOf(acq))
}

// Do runs fn under n permits, as Lock.Do.
func (s *Semaphore) Do(ctx context.Context, n int, fn func(context.Context) error) error {
	return doWith(ctx, func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, n) }, s.Release, fn)
}

// SemaphoreState is what Redis holds for a Semaphore now.
type SemaphoreState struct {
	Permits int // the capacity recorded (this Semaphore's when none is)
	Used    int // permits held by live holds
	Holds   int // live holds (acquisitions)
	Waiters int // waiters queued
}

// State reads the semaphore's state, counting live holds only.
func (s *Semaphore) State(ctx context.Context) (SemaphoreState, error) {
	ctx, err := s.checkQuery(ctx)
	if err != nil {
		return SemaphoreState{}, err
	}
	res, err := queryBounded(s.c, ctx, "semaphore state", func() ([]int64, error) {
		return s.c.eval(context.WithoutCancel(ctx), "semaphore state", semaStateCall(s)).Int64Slice()
	})
	if err != nil {
		return SemaphoreState{}, err
	}
	if len(res) != 4 {
		return SemaphoreState{}, fmt.Errorf("relock: semaphore state script returned %d values, want 4", len(res))
	}
	st := SemaphoreState{Permits: int(res[0]), Used: int(res[1]), Waiters: int(res[2]), Holds: int(res[3])}
	if st.Permits == 0 {
		st.Permits = s.Permits()
	}
	return st, nil
}

// Available returns how many permits are free now.
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	st, err := s.State(ctx)
	return st.Permits - st.Used, err
}

// SetPermits sets the capacity to n in Redis and for s; others must use n.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	ctx, err := s.check(ctx)
	if err != nil {
		return err
	}
	if err := checkPermits(n); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("relock: set permits: %w", context.Cause(ctx))
	}
	dctx := context.WithoutCancel(ctx)
	_, err, late := awaitBounded(ctx, time.Time{}, func() (struct{}, error) { return struct{}{}, s.set(dctx, n) })
	if late != nil {
		s.c.goSettle(func() { <-late })
		return fmt.Errorf("relock: set permits: %w: %w", context.Cause(ctx), s.c.unanswered("the change may still apply"))
	}
	return err
}

// set records capacity n in Redis, then in this Semaphore, with no acquire
// attempt of this value in flight.
func (s *Semaphore) set(ctx context.Context, n int) error {
	s.setting.Lock()
	defer s.setting.Unlock()
	if err := s.c.eval(ctx, "set permits", semaSetCall(s, n)).Err(); err != nil {
		return err
	}
	s.permits.Store(int64(n))
	return nil
}

// semaScheme is one acquisition of a Semaphore: a scheme whose holdID is
// the acquisition's own, so that each Acquire is a hold record of its own
// (a new generation, never a re-entry) and Release ends exactly it.
type semaScheme struct {
	s  *Semaphore
	id string // the acquisition, unique in the Client
	n  int    // permits asked for
}

func (a semaScheme) client() *Client { return a.s.c }
func (a semaScheme) holdID() string  { return a.s.hash + "#" + a.id }

func (a semaScheme) info() LockInfo { return LockInfo{Name: a.s.ks.name, Kind: KindSemaphore} }

func (a semaScheme) acquire(ctx context.Context, r acquireReq) (attempt, error) {
	s := a.s
	s.setting.RLock()
	capacity := s.Permits()
	at, err := s.c.runAcquire(ctx, semaAcquireCall(s, r, a.n, capacity), s.waitChannel, func(status, value int64) error {
		if status < 0 {
			return a.refused(status, value, capacity)
		}
		return nil
	})
	s.setting.RUnlock()
	if at.outcome == busy && r.waiter {
		// The next attempt renews the claim: before the waiter timeout.
		at.retryIn = s.c.refreshWithin(at.retryIn)
	}
	return at, err
}

// refused is the error of an attempt the script refused with the reply
// {status, value}: capacity is the one it sent.
func (a semaScheme) refused(status, value int64, capacity int) error {
	if status == -4 {
		return fmt.Errorf("%w: asked for %d permits of semaphore %q, whose capacity is %d now", ErrInvalidArgument, a.n, a.s.ks.name, value)
	}
	if status == -3 {
		return fmt.Errorf("%w: semaphore %q has %d permits in Redis, this Semaphore %d (all users pass the same; SetPermits changes it)",
			ErrInvalidArgument, a.s.ks.name, value, capacity)
	}
	return fmt.Errorf("relock: semaphore acquire script returned status %d", status)
}

func (a semaScheme) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	return a.s.c.runRelease(ctx, semaReleaseCall(a.s, r))
}

func (a semaScheme) renewal(_, gen string, lease time.Duration) renewal {
	return renewal{call: semaRenewCall(a.s.hash, gen, lease)}
}

// traits: a Semaphore's waiters queue in Redis and are handed permits.
func (a semaScheme) traits() traits { return traits{queue: semaQueue{a.s}} }

// semaQueue is a Semaphore's waitQueue.
type semaQueue struct{ s *Semaphore }

func (q semaQueue) channel() string { return q.s.waitChannel }

// leave takes a waiter that gave up out of the queue (see
// Client.leaveQueue). owner "" is the release of a stray grant (see
// strayRelease), which checks the hold records of one acquisition
// only: a duplicate grant of a hold that another acquisition of this
// semaphore claimed is kept here.
func (q semaQueue) leave(ctx context.Context, owner, waiter string, _ time.Duration) {
	if owner == "" && q.s.holdsGeneration(waiter) {
		return
	}
	q.s.c.leaveQueue(ctx, semaAbandonCall(q.s, waiter))
}

// holdsGeneration reports whether an acquisition of this semaphore in this
// Client holds generation gen.
func (s *Semaphore) holdsGeneration(gen string) bool {
	r := &s.c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.m {
		if h.gen == gen && strings.HasPrefix(k.id, s.hash+"#") {
			return true
		}
	}
	return false
}

// The Semaphore's scripts (see scripts.go for the conventions) and their
// calls.

// semaKeys are the keys of a Semaphore's scripts: its hash, then extra
// (its tail, for the scripts that write it), then its sorted sets.
func (s *Semaphore) semaKeys(extra ...string) []string {
	return append(append(append(make([]string, 0, 5), s.hash), extra...), s.sets[:]...)
}

var semaAcquireScript = newScript("sema_acquire")

// semaAcquireCall takes n permits (request r) of a semaphore of capacity
// cap, or queues the waiter (r.waiter).
func semaAcquireCall(s *Semaphore, r acquireReq, n, capacity int) scriptCall {
	c := s.c
	return scriptCall{script: semaAcquireScript, keys: s.semaKeys(),
		args: []any{r.owner, r.op, n, capacity, c.leaseArg(r.lease), flagArg(r.waiter),
			c.args.waiterTimeout, c.args.publish, c.args.blind}}
}

var semaReleaseScript = newScript("sema_release")

// semaReleaseCall gives back the permits of hold r.gen.
func semaReleaseCall(s *Semaphore, r releaseReq) scriptCall {
	c := s.c
	return scriptCall{script: semaReleaseScript, keys: s.semaKeys(s.latch),
		args: []any{r.gen, r.op, c.args.publish, c.args.latch, c.args.blind, flagArg(r.void)}}
}

var semaAbandonScript = newScript("sema_abandon")

// semaAbandonCall takes waiter out of the queue, giving back a grant
// handed to it.
func semaAbandonCall(s *Semaphore, waiter string) scriptCall {
	return scriptCall{script: semaAbandonScript, keys: s.semaKeys(), args: []any{waiter, s.c.args.publish, s.c.args.blind}}
}

var semaSetScript = newScript("sema_set")

// semaSetCall records capacity n.
func semaSetCall(s *Semaphore, n int) scriptCall {
	return scriptCall{script: semaSetScript, keys: s.semaKeys(), args: []any{n, s.c.args.publish, s.c.args.blind}}
}

var semaStateScript = newScript("sema_state")

// semaStateCall reads {capacity, used, waiters, holds}.
func semaStateCall(s *Semaphore) scriptCall {
	return scriptCall{script: semaStateScript, keys: s.semaKeys()}
}

var semaRenewScript = newScript("sema_renew")

// semaRenewCall renews (lease 0: checks) hold gen: one item of a batch,
// which names the hash only (the script finds the holds' sorted set
// beside it).
func semaRenewCall(hash, gen string, lease time.Duration) scriptCall {
	return scriptCall{script: semaRenewScript, keys: []string{hash}, args: []any{gen, lease.Milliseconds()}}
}
