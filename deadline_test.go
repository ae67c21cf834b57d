package relock_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// deadlineLocker is what every lock type offers a caller with a deadline.
type deadlineLocker interface {
	Lock(ctx context.Context) (context.Context, error)
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
	Do(ctx context.Context, fn func(ctx context.Context) error) error
}

var deadlineKinds = []struct {
	name string
	open func(c *relock.Client, name string) deadlineLocker
}{
	{"Lock", func(c *relock.Client, n string) deadlineLocker { return c.Lock(n) }},
	{"FairLock", func(c *relock.Client, n string) deadlineLocker { return c.FairLock(n) }},
	{"ReadLock", func(c *relock.Client, n string) deadlineLocker { return c.RWLock(n).ReadLock() }},
	{"WriteLock", func(c *relock.Client, n string) deadlineLocker { return c.RWLock(n).WriteLock() }},
	{"MultiLock", func(c *relock.Client, n string) deadlineLocker {
		return relock.NewMultiLock(c.Lock(n+":a"), c.Lock(n+":b"))
	}},
	{"RedLock", func(c *relock.Client, n string) deadlineLocker { return relock.NewRedLock(n, []*relock.Client{c}) }},
}

// A deadlineFault breaks the link between a Client and its Redis after the
// Client has warmed up (a connection open, the scripts loaded), and heals it.
// admin, when set, reaches the server directly, to check what is left there.
type deadlineFault struct {
	name  string
	setup func(t *testing.T) (rdb, admin *redis.Client, breakIt, heal func())
}

// onePool: a single connection, so that every request meets the fault (a
// blackhole drops only the connections open when it starts).
func onePool(o *redis.Options) { o.PoolSize = 1 }

var deadlineFaults = []deadlineFault{
	{"Hung", func(t *testing.T) (*redis.Client, *redis.Client, func(), func()) {
		srv := redistest.Start(t)
		return srv.Client(onePool), srv.Client(), srv.Pause, srv.Resume
	}},
	{"Refused", func(t *testing.T) (*redis.Client, *redis.Client, func(), func()) {
		port, err := redistest.FreePort()
		require.NoError(t, err)
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb, nil, func() {}, func() {}
	}},
	{"Slow1s", func(t *testing.T) (*redis.Client, *redis.Client, func(), func()) {
		srv := redistest.Start(t)
		p := redistest.NewProxy(t, srv.Addr())
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: 1})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb, srv.Client(), func() { p.SetDelay(time.Second) }, func() { p.SetDelay(0) }
	}},
	{"Blackholed", func(t *testing.T) (*redis.Client, *redis.Client, func(), func()) {
		srv := redistest.Start(t)
		p := redistest.NewProxy(t, srv.Addr())
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: 1})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb, srv.Client(), p.Blackhole, p.Unblackhole
	}},
}

const (
	callBound = 300 * time.Millisecond // the caller's deadline, TryLock's wait, the unlock timeout
	// boundSlack covers the documented slack and a loaded 2-core -race run;
	// the fallback this guards against (go-redis's timeouts) is >= 3 s.
	boundSlack = 700 * time.Millisecond
)

// Every call of every lock type returns by its caller's bound whatever
// Redis does (hung, refusing connections, slow by 1 s, blackholed), with an
// error saying why; once Redis answers again, nothing is left held by the
// Client whose callers were told "not obtained" or "not confirmed".
func TestCallsReturnByTheCallersBound(t *testing.T) {
	for _, f := range deadlineFaults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			rdb, admin, breakIt, heal := f.setup(t)
			runBoundedCalls(t, rdb, admin, breakIt, heal)
		})
	}
}

// runBoundedCalls takes, on a Client of rdb, the holds the Unlock case
// releases (when admin, the fault's direct client, is set: Redis could be
// reached), breaks Redis, makes every call of boundedCalls on every lock
// type at once, heals it, and checks that nothing is left held.
func runBoundedCalls(t *testing.T, rdb, admin *redis.Client, breakIt, heal func()) {
	c := relock.New(rdb, relock.WithUnlockTimeout(callBound), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	held := map[string]context.Context{}
	if admin != nil { // warm up, and take the holds the Unlock case releases
		for _, k := range deadlineKinds {
			l := k.open(c, "warm:"+k.name)
			hctx, err := l.Lock(context.Background())
			require.NoError(t, err, k.name)
			require.NoError(t, l.Unlock(hctx), k.name)
			held[k.name], err = k.open(c, "Unlock:"+k.name).Lock(context.Background())
			require.NoError(t, err, k.name)
		}
	}
	breakIt()
	var wg sync.WaitGroup
	for _, k := range deadlineKinds {
		for _, call := range boundedCalls {
			if call.name == "Unlock" && admin == nil {
				continue // nothing could be locked
			}
			wg.Go(func() { call.run(t, k.name, k.open(c, call.name+":"+k.name), held[k.name]) })
		}
	}
	wg.Wait()
	heal()
	if admin != nil {
		requireNothingOf(t, admin, c.ID(), 20*time.Second)
	}
}

// boundedCalls are the calls TestCallsReturnByTheCallersBound makes during
// the fault; each checks its own time and error.
var boundedCalls = []struct {
	name string
	run  func(t *testing.T, kind string, l deadlineLocker, held context.Context)
}{
	{"Lock", func(t *testing.T, kind string, l deadlineLocker, _ context.Context) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		start := time.Now()
		hctx, err := l.Lock(ctx)
		if obtainedOnANewConnection(t, l, start, hctx, err) {
			return
		}
		checkBound(t, kind+" Lock", start, err, context.DeadlineExceeded)
	}},
	{"TryLock", func(t *testing.T, kind string, l deadlineLocker, _ context.Context) {
		start := time.Now()
		hctx, err := l.TryLock(context.Background(), callBound, 0)
		if obtainedOnANewConnection(t, l, start, hctx, err) {
			return
		}
		checkBound(t, kind+" TryLock", start, err, nil)
	}},
	{"Do", func(t *testing.T, kind string, l deadlineLocker, _ context.Context) {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		start := time.Now()
		ran := false
		err := l.Do(ctx, func(context.Context) error { ran = true; return nil })
		if ran && newConnectionsWork(t) { // see obtainedOnANewConnection
			checkReleaseAfterACut(t, kind+" Do", func() error { return err })
			return
		}
		assert.False(t, ran, "%s Do: fn ran without the lock", kind)
		checkBound(t, kind+" Do", start, err, context.DeadlineExceeded)
	}},
	{"Unlock", func(t *testing.T, kind string, l deadlineLocker, held context.Context) {
		start := time.Now()
		err := l.Unlock(held)
		took := time.Since(start)
		assert.Less(t, took, callBound+boundSlack, "%s Unlock took %v", kind, took)
		assert.ErrorIs(t, context.Cause(held), relock.ErrUnlocked, "%s Unlock: the hold ends for the caller", kind)
		if err == nil && newConnectionsWork(t) {
			return // confirmed on a connection dialed after a cut (see newConnectionsWork)
		}
		assert.ErrorIs(t, err, relock.ErrUnavailable, "%s Unlock", kind)
		if kind != "RedLock" { // a RedLock's master that does not answer simply does not count
			assert.ErrorIs(t, err, relock.ErrNotConfirmed, "%s Unlock", kind)
		}
	}},
}

// newConnectionsWork reports whether t's fault leaves new connections
// working while go-redis, enforcing the caller's bound itself (with
// ContextTimeoutEnabled, or on the bounded clone relock runs a default
// client's calls on), closes the connection a call was cut on: a
// blackholed connection. A call may then obtain the lock on a connection
// dialed after the cut (a RedLock's node timeout cuts its attempt, and its
// retry, or any call queued for the pool's one connection, goes on a new
// one; an Unlock likewise), which is no failure of the bound.
func newConnectionsWork(t *testing.T) bool {
	return strings.HasSuffix(t.Name(), "/Blackholed")
}

// obtainedOnANewConnection unlocks a hold a call (started at start)
// obtained where newConnectionsWork, having checked that it came within the
// bound, and reports whether it did: then there is no failure to check.
func obtainedOnANewConnection(t *testing.T, l deadlineLocker, start time.Time, hctx context.Context, err error) bool {
	if err != nil || !newConnectionsWork(t) {
		return false
	}
	took := time.Since(start)
	assert.Less(t, took, callBound+boundSlack, "obtained after %v", took)
	checkReleaseAfterACut(t, "Unlock", func() error { return l.Unlock(hctx) })
	return true
}

// checkReleaseAfterACut releases a hold obtained on a connection dialed
// after a cut. The release shares the pool's one connection with every
// other call of the test: it may stay unconfirmed by its bound, and is
// then retried (the check for leftovers after the fault sees it done).
func checkReleaseAfterACut(t *testing.T, what string, release func() error) {
	start := time.Now()
	if err := release(); err != nil {
		assert.ErrorIs(t, err, relock.ErrNotConfirmed, what)
		assert.ErrorIs(t, err, relock.ErrUnavailable, what)
	}
	assert.Less(t, time.Since(start), callBound+boundSlack, "%s: its release", what)
}

// checkBound asserts that a Lock call failed by its bound, not obtained,
// because of Redis, and because of cause when set (the context's).
func checkBound(t *testing.T, what string, start time.Time, err error, cause error) {
	t.Helper()
	took := time.Since(start)
	assert.Less(t, took, callBound+boundSlack, "%s took %v (err %v)", what, took, err)
	assert.ErrorIs(t, err, relock.ErrUnavailable, what)
	if took < callBound/2 {
		return // failed at once (a refused connection), before any bound
	}
	assert.ErrorIs(t, err, relock.ErrNotObtained, what)
	if cause != nil {
		assert.ErrorIs(t, err, cause, what)
	}
}

// requireNothingOf waits until no hash field, queue entry or set member in
// Redis names an owner of the Client id: every request of unknown outcome
// was reconciled.
func requireNothingOf(t *testing.T, rdb *redis.Client, id string, within time.Duration) {
	t.Helper()
	var left []string
	ok := assert.Eventually(t, func() bool {
		left = tracesOf(rdb, id)
		return len(left) == 0
	}, within, 50*time.Millisecond)
	if !ok {
		t.Errorf("left in Redis by the Client: %v", left)
	}
}

func tracesOf(rdb *redis.Client, id string) []string {
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		return []string{err.Error()}
	}
	var left []string
	for _, key := range keys {
		if (strings.HasSuffix(key, ":latch:past") || strings.HasSuffix(key, ":last")) && rdb.PTTL(ctx, key).Val() > 0 {
			continue // a latch's mark or a lock's tail (its release latch), which expire
		}
		var items []string
		switch rdb.Type(ctx, key).Val() {
		case "hash":
			items, err = rdb.HKeys(ctx, key).Result()
		case "zset":
			items, err = rdb.ZRange(ctx, key, 0, -1).Result()
		case "list":
			items, err = rdb.LRange(ctx, key, 0, -1).Result()
		case "set":
			items, err = rdb.SMembers(ctx, key).Result()
		}
		if err != nil {
			return []string{err.Error()}
		}
		for _, it := range items {
			if strings.Contains(it, id) {
				left = append(left, key+" "+it)
			}
		}
	}
	return left
}

// A call that overran is reconciled only after its request has returned:
// the owner's next call on the lock waits for that (bounded by its own
// deadline), so a late grant is released before the owner asks again, and
// the lock is free once Redis answers.
func TestLateGrantIsReleasedBeforeTheOwnersNextCall(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("late")
	owner := relock.NewOwner(context.Background())
	hctx, err := l.Lock(owner)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(hctx))

	srv.Pause()
	ctx, cancel := context.WithTimeout(owner, 200*time.Millisecond)
	start := time.Now()
	_, err = l.Lock(ctx)
	cancel()
	require.ErrorIs(t, err, relock.ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, relock.ErrUnavailable)
	require.Less(t, time.Since(start), 200*time.Millisecond+boundSlack)

	// The owner's next call waits behind the one in flight, bounded by its
	// own deadline.
	ctx, cancel = context.WithTimeout(owner, 200*time.Millisecond)
	start = time.Now()
	_, err = l.Lock(ctx)
	cancel()
	require.ErrorIs(t, err, relock.ErrNotObtained)
	require.Less(t, time.Since(start), 200*time.Millisecond+boundSlack)

	srv.Resume()
	requireNothingOf(t, srv.Client(), c.ID(), 10*time.Second)
	require.Empty(t, hgetall(t, srv.Client(), l.Key()), "the late grant was released")
	hctx, err = l.TryLock(owner, 0, 0)
	require.NoError(t, err, "the lock is free again")
	require.NoError(t, l.Unlock(hctx))
}

// Unlock returns by the unlock timeout however long Redis hangs, and says
// the release was not confirmed; the release goes on after Redis answers.
func TestUnlockTimeoutOption(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, 500 * 24 * time.Hour} {
		c := relock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), relock.WithUnlockTimeout(d))
		assert.ErrorIs(t, c.Err(), relock.ErrInvalidArgument, "WithUnlockTimeout(%v)", d)
	}
	srv := redistest.Start(t)
	c := relock.New(srv.Client(), relock.WithLogger(quietLogger())) // the default timeout
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("unlock-default")
	hctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	srv.Pause()
	start := time.Now()
	err = l.Unlock(hctx)
	took := time.Since(start)
	srv.Resume()
	require.ErrorIs(t, err, relock.ErrNotConfirmed)
	require.ErrorIs(t, err, relock.ErrUnavailable)
	require.Less(t, took, relock.DefaultUnlockTimeout+boundSlack)
	// An inline release is sent again until less than twice the smallest
	// slack of a bounded request (clones.go: 2 × 50 ms) is left.
	require.GreaterOrEqual(t, took, relock.DefaultUnlockTimeout-100*time.Millisecond, "Redis was paused: nothing could confirm earlier")
	requireNothingOf(t, srv.Client(), c.ID(), 10*time.Second)
}

// A nil *Client is a caller's mistake, reported as such by every call of
// every lock type — not as a Client that was closed.
func TestNilClientIsAnInvalidArgument(t *testing.T) {
	var c *relock.Client
	for _, k := range deadlineKinds {
		if k.name == "MultiLock" || k.name == "RedLock" {
			continue // their constructors refuse a nil Client (see their tests)
		}
		l := k.open(c, "x")
		_, err := l.Lock(context.Background())
		assert.ErrorIs(t, err, relock.ErrInvalidArgument, k.name)
		assert.NotErrorIs(t, err, relock.ErrClientClosed, k.name)
		assert.ErrorIs(t, l.Unlock(context.Background()), relock.ErrInvalidArgument, k.name)
		assert.ErrorIs(t, l.Do(context.Background(), func(context.Context) error { return nil }), relock.ErrInvalidArgument, k.name)
	}
	_, err := relock.NewMultiLock(c.Lock("a")).Lock(context.Background())
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	_, err = relock.NewRedLock("r", []*relock.Client{c}).Lock(context.Background())
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
}

// quietLogger keeps the expected Warn lines of fault tests out of the test
// output.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Unlocking the outer hold before a re-entry made with its context leaves
// the re-entry held, and Redis, the Client and the contexts agree: the
// re-entry's context stays live (it still follows the caller's context),
// Redis still holds the lock for the owner until the re-entry's Unlock.
func TestOuterUnlockedBeforeTheReentryLeavesTheReentryHeld(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	c := relock.New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	for _, k := range deadlineKinds {
		t.Run(k.name, func(t *testing.T) {
			l := k.open(c, "outer-first:"+k.name)
			req, cancelReq := context.WithCancel(context.Background())
			defer cancelReq()
			h, err := l.Lock(req)
			require.NoError(t, err)
			h2, err := l.Lock(h)
			require.NoError(t, err)
			h3, err := l.Lock(h2) // a re-entry of the re-entry
			require.NoError(t, err)

			require.NoError(t, l.Unlock(h))
			require.ErrorIs(t, context.Cause(h), relock.ErrUnlocked)
			require.NoError(t, l.Unlock(h2))
			time.Sleep(20 * time.Millisecond) // a wrongly propagated cancellation would have arrived
			require.NoError(t, h3.Err(), "the innermost re-entry is still held")
			require.NotEmpty(t, tracesOf(admin, c.ID()), "Redis still holds it for the owner")

			cancelReq() // the caller's own cancellation still reaches it
			require.Eventually(t, func() bool { return h3.Err() != nil }, 5*time.Second, time.Millisecond)
			require.ErrorIs(t, context.Cause(h3), context.Canceled)
			require.NotEmpty(t, tracesOf(admin, c.ID()), "a cancelled context does not release the lock")
			require.NoError(t, l.Unlock(h3))
			require.Empty(t, tracesOf(admin, c.ID()), "the last Unlock frees it")
		})
	}
}

// The default logger is slog.Default(), so that a loss is never silent: one
// Warn line, as the README promises. WithLogger silences it.
func TestDefaultLoggerIsSlogDefault(t *testing.T) {
	logs := &relock.CountingHandler{}
	prev := slog.Default()
	slog.SetDefault(slog.New(logs))
	t.Cleanup(func() { slog.SetDefault(prev) })

	srv := redistest.Start(t)
	c := relock.New(srv.Client()) // no WithLogger
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("logged")
	hctx, err := l.TryLock(context.Background(), 0, 200*time.Millisecond)
	require.NoError(t, err)
	<-hctx.Done() // the lease runs out: a loss
	require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
	require.Equal(t, []string{"relock: lock lost"}, logs.Messages(slog.LevelWarn))
}

// Inspect, ListLocks and ForceUnlock return when their context ends, Redis
// hung or not.
func TestQueriesAndForceUnlockHonourTheirContext(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	hctx, err := c.Lock("q").Lock(context.Background())
	require.NoError(t, err)
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	calls := map[string]func(ctx context.Context) error{
		"Inspect":   func(ctx context.Context) error { _, err := c.Inspect(ctx, "q"); return err },
		"ListLocks": func(ctx context.Context) error { _, err := c.ListLocks(ctx, ""); return err },
		"ForceUnlock": func(ctx context.Context) error {
			_, err := c.Lock("q").ForceUnlock(ctx)
			return err
		},
		"IsLocked":  func(ctx context.Context) error { _, err := c.Lock("q").IsLocked(ctx); return err },
		"HoldCount": func(ctx context.Context) error { _, err := c.Lock("q").HoldCount(hctx2(ctx, hctx)); return err },
		"TTL":       func(ctx context.Context) error { _, err := c.FairLock("q").TTL(ctx); return err },
		"RWLock.IsLocked": func(ctx context.Context) error {
			_, err := c.RWLock("q").WriteLock().IsLocked(ctx)
			return err
		},
	}
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), callBound)
			defer cancel()
			start := time.Now()
			err := call(ctx)
			took := time.Since(start)
			assert.Less(t, took, callBound+boundSlack, "%s took %v", name, took)
			assert.ErrorIs(t, err, context.DeadlineExceeded, name)
			assert.ErrorIs(t, err, relock.ErrUnavailable, name)
		}()
	}
	wg.Wait()
	srv.Resume()
	resumed = true
	// The force-release ran once Redis answered; this Client's hold ends.
	require.Eventually(t, func() bool { return hctx.Err() != nil }, 10*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
}

// hctx2 is ctx (its deadline) carrying the owner of the hold context hctx,
// so that a query asks about that owner.
func hctx2(ctx, hctx context.Context) context.Context {
	id, _ := relock.OwnerOf(hctx)
	octx, err := relock.WithOwner(ctx, id)
	if err != nil {
		return ctx
	}
	return octx
}
