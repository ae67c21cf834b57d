package relock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Unlock runs its release on the caller's goroutine where go-redis ends it
// by the unlock timeout itself: with ContextTimeoutEnabled, or with write
// and read timeouts that fit in half the bound (the release's context
// then ends that much earlier, see inline.go). On a hung Redis (SIGSTOP)
// it still returns by the unlock timeout, not confirmed; once Redis answers
// again, the release retried in the background (or the one cut short,
// which Redis may still run: the same op id) frees the lock and hands it to
// the waiter of another Client at once — not at the end of the holder's
// lease (30 s), the fallback.
func TestInlineUnlockOnAHungRedisReturnsByItsBoundAndHandsOver(t *testing.T) {
	for _, setup := range []struct {
		name  string
		opts  func(*redis.Options)
		bound time.Duration // the unlock timeout
		least time.Duration // what ends the release first: the bound, or go-redis's read timeout
	}{
		{"ContextTimeoutEnabled", func(o *redis.Options) { o.ContextTimeoutEnabled = true }, callBound, callBound},
		{"ShortTimeouts", func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond }, time.Second, 200 * time.Millisecond},
	} {
		t.Run(setup.name, func(t *testing.T) {
			eachKind(t, func(t *testing.T, k lockKind) {
				t.Parallel()
				unlockOnAHungRedis(t, k, setup.opts, setup.bound, setup.least)
			})
		})
	}
}

func unlockOnAHungRedis(t *testing.T, k lockKind, opts func(*redis.Options), bound, least time.Duration) {
	srv := redistest.Start(t)
	holder := relock.New(srv.Client(opts), relock.WithUnlockTimeout(bound), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = holder.Close() })
	// The waiter's releases run inline too: the counter of release
	// goroutines is the package's, and its sibling subtests run meanwhile.
	waiter := relock.New(srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true }), append(farWaiter, relock.WithLogger(quietLogger()))...)
	t.Cleanup(func() { _ = waiter.Close() })

	l := k.open(holder, "hung")
	hctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	got := lockAsync(k.open(waiter, "hung"))
	require.Eventually(t, func() bool { return queuedWaiters(t, srv.Client(), k, k.keyOf(holder, "hung")) == 1 },
		5*time.Second, time.Millisecond, "the waiter queues, to be handed the lock")

	goroutines := relock.ReleaseGoroutines()
	srv.Pause()
	start := time.Now()
	err = l.Unlock(hctx)
	took := time.Since(start)
	require.ErrorIs(t, err, relock.ErrNotConfirmed)
	require.ErrorIs(t, err, relock.ErrUnavailable)
	assert.Equal(t, goroutines, relock.ReleaseGoroutines(), "the release ran on the caller's goroutine")
	assert.Less(t, took, bound+boundSlack, "Unlock returns by its bound")
	assert.GreaterOrEqual(t, took, least, "Redis never answered: only the bound, or go-redis's timeout, ended it")
	mustNotGet(t, got)

	resumed := time.Now()
	srv.Resume()
	wctx := mustGet(t, got, 20*time.Second)
	handOff := time.Since(resumed)
	t.Logf("Unlock returned after %v; the waiter had the lock %v after Redis resumed", took, handOff)
	assert.Less(t, handOff, 5*time.Second, "handed over by the release, not by the lease's end (30 s)")
	require.NoError(t, k.open(waiter, "hung").Unlock(wctx))
}

// Without ContextTimeoutEnabled go-redis retries a request whose read timed
// out (MaxRetries), each time on another pooled connection, and it stops
// retrying at the context's deadline only. An inline release's context
// ends early by the write and read timeouts (here 400 ms before the 1 s
// bound), so that the attempt in flight then is over by the bound: go-redis
// would retry on each of 24 open connections, 200 ms each, for 4.8 s; with
// the context ending at the bound itself, the attempt in flight would end
// up to 200 ms past it.
func TestInlineUnlockStopsGoRedisRetriesByItsBound(t *testing.T) {
	srv := redistest.Start(t)
	const timeout, bound = 200 * time.Millisecond, time.Second
	rdb := srv.Client(func(o *redis.Options) {
		o.ReadTimeout, o.WriteTimeout = timeout, timeout
		o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = 30, time.Millisecond, 2*time.Millisecond
		o.PoolSize = 32
	})
	c := relock.New(rdb, relock.WithUnlockTimeout(bound), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("retries")
	hctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	openConnections(t, rdb, 24)

	goroutines := relock.ReleaseGoroutines()
	srv.Pause()
	start := time.Now()
	err = l.Unlock(hctx)
	took := time.Since(start)
	srv.Resume()
	t.Logf("Unlock returned after %v: %v", took, err)
	require.ErrorIs(t, err, relock.ErrNotConfirmed)
	assert.Equal(t, goroutines, relock.ReleaseGoroutines(), "the release ran on the caller's goroutine")
	assert.GreaterOrEqual(t, took, bound-2*timeout-50*time.Millisecond, "go-redis retried until the release's context ended")
	assert.Less(t, took, bound, "Unlock returns by its bound")
	check := srv.Client()
	require.Eventually(t, func() bool { return !check.HExists(context.Background(), l.Key(), "~g").Val() },
		5*time.Second, 10*time.Millisecond, "the release retried in the background frees the lock")
}

// openConnections has rdb open and set up n connections, left idle in its
// pool: n commands that each block 300 ms, at once.
func openConnections(t *testing.T, rdb *redis.Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rdb.BLPop(context.Background(), 300*time.Millisecond, fmt.Sprintf("relock-test-nothing-%d", i))
		})
	}
	wg.Wait()
	require.GreaterOrEqual(t, int(rdb.PoolStats().IdleConns), n)
}

// The same holder's next Lock on the lock waits for its release retried in
// the background (the records' semaphores stay taken until then): it is
// sent once Redis has settled the release, and finds the lock free.
func TestInlineUnlockCutShortKeepsTheOwnersNextLockBehindItsRetry(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	c := relock.New(rdb, relock.WithUnlockTimeout(callBound), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("behind")
	owner, err := relock.WithOwner(context.Background(), "the-owner")
	require.NoError(t, err)
	hctx, err := l.Lock(owner)
	require.NoError(t, err)
	first, err := l.Token(hctx)
	require.NoError(t, err)

	srv.Pause()
	require.ErrorIs(t, l.Unlock(hctx), relock.ErrNotConfirmed)
	// Still paused: the same owner's Lock cannot get ahead of the release.
	_, err = l.TryLock(owner, callBound, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	assert.ErrorContains(t, err, "earlier request of this owner on the lock was in flight")
	srv.Resume()

	again, err := l.TryLock(owner, 10*time.Second, 0)
	require.NoError(t, err)
	token, err := l.Token(again)
	require.NoError(t, err)
	assert.Greater(t, token, first, "a new hold, not the old one taken over")
	require.NoError(t, l.Unlock(again))
}

// inlineAllocBudget is TestLockUnlockAllocBudget's with ContextTimeoutEnabled
// (28 measured, as on the default client, whose release runs inline too):
// one more for room. The release's deadline context is relock's own (4
// allocations, 7 fewer than context.WithDeadline's); a pool of them would
// save 4, and is left out (see deadlineCtx).
const inlineAllocBudget = lockUnlockAllocBudget + 1

func TestInlineLockUnlockAllocBudget(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true }))
	t.Cleanup(func() { _ = c.Close() })
	got := lockUnlockAllocs(t, c)
	budget := float64(inlineAllocBudget)
	if raceEnabled {
		budget += 2 // see race_on_test.go
	}
	t.Logf("Lock+Unlock inline: %.1f allocs (budget %.0f)", got, budget)
	assert.LessOrEqual(t, got, budget)
}

type traceKey struct{}

// tracingHook records the trace value of the context every script call
// is sent with.
type tracingHook struct {
	relock.PassHook
	mu   sync.Mutex
	seen []any
}

func (h *tracingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.mu.Lock()
			h.seen = append(h.seen, ctx.Value(traceKey{}))
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// An inline release is sent with a context derived from the caller's: a
// hook sees its values (a trace span), as it does on the other path.
func TestInlineReleaseCarriesTheCallersValues(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("traced")
	warm, err := l.Lock(context.Background()) // the server learns the scripts: one EVALSHA each from now on
	require.NoError(t, err)
	require.NoError(t, l.Unlock(warm))
	h := &tracingHook{}
	rdb.AddHook(h)
	held, err := l.Lock(context.WithValue(context.Background(), traceKey{}, "span-1"))
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, []any{"span-1", "span-1"}, h.seen, "the acquire's and the release's")
}

// TestCallsReturnByTheCallersBound again, on go-redis clients with
// ContextTimeoutEnabled: every call of every lock type (Unlock inline, but
// a RedLock's) returns by its bound whatever Redis does, and once Redis
// answers again nothing is left held by the Client (a release cut short
// is retried; an acquire stays detached and is reconciled).
func TestCallsReturnByTheCallersBoundWithContextTimeouts(t *testing.T) {
	for _, f := range deadlineFaults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			rdb, admin, breakIt, heal := f.setup(t)
			rdb.Options().ContextTimeoutEnabled = true // before its first command
			runBoundedCalls(t, rdb, admin, breakIt, heal)
		})
	}
}

// On go-redis's default *redis.Client, a Lock with a deadline and every
// Unlock run on clones New made (with go-redis's default timeouts a
// request could outlive the bound on the client itself). A hook added to
// the client before New sees those calls, with the caller's values, in its
// place among the client's hooks; one added after New sees only the calls
// that run on the client itself (a Lock without a deadline). Each run is
// one EVALSHA: the hook sees each call once.
func TestHooksAddedBeforeNewSeeTheBoundedCalls(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	before := &tracingHook{}
	rdb.AddHook(before)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	after := &tracingHook{}
	rdb.AddHook(after)
	l := c.Lock("hooked")
	warm, err := l.Lock(context.Background()) // the server learns the scripts: one EVALSHA each from now on
	require.NoError(t, err)
	require.NoError(t, l.Unlock(warm))
	before.reset()
	after.reset()

	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), traceKey{}, "bounded"), 5*time.Second)
	defer cancel()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))
	held, err = l.Lock(context.WithValue(context.Background(), traceKey{}, "unbounded"))
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))

	assert.Equal(t, []any{"bounded", "bounded", "unbounded", "unbounded"}, before.values(), "a hook added before New sees every call")
	assert.Equal(t, []any{"unbounded"}, after.values(), "a hook added after New sees the unbounded Lock only")
}

func (h *tracingHook) reset() { h.mu.Lock(); h.seen = nil; h.mu.Unlock() }

func (h *tracingHook) values() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}
