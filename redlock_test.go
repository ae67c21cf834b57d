package relock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// masters starts n independent redis-servers.
func masters(t testing.TB, n int) []*redistest.Server {
	srvs := make([]*redistest.Server, n)
	for i := range srvs {
		srvs[i] = redistest.Start(t)
	}
	return srvs
}

// process returns one Client per master, as one process would have, closed
// when t ends. The first one carries opts (it is the RedLock's home).
func process(t testing.TB, srvs []*redistest.Server, opts ...relock.Option) []*relock.Client {
	clients := make([]*relock.Client, len(srvs))
	for i, srv := range srvs {
		var o []relock.Option
		if i == 0 {
			o = opts
		}
		clients[i] = relock.New(srv.Client(func(o *redis.Options) { o.MaxRetries = -1 }), o...)
		c := clients[i]
		t.Cleanup(func() { _ = c.Close() })
	}
	return clients
}

// redField is the owner field a RedLock writes on every master.
func redField(t testing.TB, home *relock.Client, ctx context.Context) string {
	return ownerField(t, home, ctx) + ":red"
}

// Generous for a loaded CI machine; the paused-master test sets its own.
var testNodeTimeout = relock.WithNodeTimeout(500 * time.Millisecond)

func TestRedLockHoldsAMajorityAndReleasesEverywhere(t *testing.T) {
	srvs := masters(t, 3)
	clients := process(t, srvs)
	r := relock.NewRedLock("orders", clients, testNodeTimeout)
	require.Equal(t, 2, r.Quorum())
	from := time.Now()
	ctx, err := r.Lock(context.Background())
	require.NoError(t, err)
	to := time.Now()
	owner := redField(t, clients[0], ctx)
	tok, err := r.Token(ctx)
	require.NoError(t, err)
	assertClockToken(t, tok, from, to, "a token is the masters' clock in µs")
	var gen string
	for _, srv := range srvs {
		h := assertHeldBy(t, srv.Client(), "relock:{orders}", owner, 1)
		assert.Greater(t, pttl(t, srv.Client(), "relock:{orders}"), 25*time.Second)
		assert.LessOrEqual(t, h.token, tok, "the RedLock's token is the largest granted")
		assert.Equal(t, h.gen, h.op)
		if gen == "" {
			gen = h.gen
		}
		assert.Equal(t, gen, h.gen, "one generation on every master")
	}
	v, err := r.Validity(ctx)
	require.NoError(t, err)
	assert.Greater(t, v, 25*time.Second)
	assert.Less(t, v, relock.DefaultWatchdogLease-300*time.Millisecond, "less the drift allowance (1% + 2ms)")

	// Re-entry: every master counts 2, in the same generation; same token.
	ctx2, err := r.Lock(ctx)
	require.NoError(t, err)
	for _, srv := range srvs {
		h := assertHeldBy(t, srv.Client(), "relock:{orders}", owner, 2)
		assert.Equal(t, gen, h.gen)
		assert.NotEqual(t, gen, h.op, "the re-entry is the last op")
	}
	tok2, err := r.Token(ctx2)
	require.NoError(t, err)
	assert.Equal(t, tok, tok2)

	// Another process cannot get it, and leaves nothing behind trying.
	other := relock.NewRedLock("orders", process(t, srvs), testNodeTimeout)
	_, err = other.TryLock(context.Background(), 0, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	assert.Contains(t, err.Error(), "0 of 3 masters granted")
	for _, srv := range srvs {
		assert.Equal(t, gen, assertHeldBy(t, srv.Client(), "relock:{orders}", owner, 2).gen)
	}

	require.NoError(t, r.Unlock(ctx2))
	for _, srv := range srvs {
		assert.Equal(t, gen, assertHeldBy(t, srv.Client(), "relock:{orders}", owner, 1).gen)
	}
	require.NoError(t, r.Unlock(ctx))
	assert.ErrorIs(t, context.Cause(ctx), relock.ErrUnlocked)
	for _, srv := range srvs {
		assert.Empty(t, hgetall(t, srv.Client(), "relock:{orders}"))
		assert.Empty(t, lockKeys(t, srv), "only tails and latches are left")
		assert.LessOrEqual(t, tailOf(t, srv.Client(), tailKey("relock:{orders}"), defaultLatch), tok)
	}
	assert.ErrorIs(t, r.Unlock(ctx), relock.ErrNotHeld)
	_, err = r.Validity(ctx)
	assert.ErrorIs(t, err, relock.ErrNotHeld)
	assert.Zero(t, clients[0].TrackedHolds())
	assert.Zero(t, clients[0].WatchedHolds())
}

// Unlock reports ErrLockLost when fewer than a majority still had the hold,
// and a release that comes after the hold was lost never touches a later
// hold: it names the generation it ends.
func TestRedLockLateUnlockNeverReleasesALaterHold(t *testing.T) {
	srvs := masters(t, 3)
	clients := process(t, srvs)
	r := relock.NewRedLock("late", clients, testNodeTimeout)
	ctx := context.Background()

	// Two of three masters lose the hold: Unlock says so, and still
	// releases the master that had it.
	hctx, err := r.Lock(ctx)
	require.NoError(t, err)
	for _, i := range []int{0, 1} {
		require.NoError(t, srvs[i].Client().Del(ctx, "relock:{late}").Err())
	}
	require.ErrorIs(t, r.Unlock(hctx), relock.ErrLockLost)
	require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
	for _, srv := range srvs {
		assert.Empty(t, hgetall(t, srv.Client(), "relock:{late}"))
	}

	// Force-unlocked everywhere by another process, which takes it: the
	// first holder's late Unlock changes nothing on any master.
	hctx, err = r.Lock(ctx)
	require.NoError(t, err)
	other := relock.NewRedLock("late", process(t, srvs), testNodeTimeout)
	n, err := other.ForceUnlock(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	octx, err := other.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	before := make([]map[string]string, len(srvs))
	for i, srv := range srvs {
		before[i] = hgetall(t, srv.Client(), "relock:{late}")
		require.NotEmpty(t, before[i])
	}
	assert.ErrorIs(t, r.Unlock(hctx), relock.ErrLockLost)
	for i, srv := range srvs {
		assert.Equal(t, before[i], hgetall(t, srv.Client(), "relock:{late}"), "the later hold is untouched")
	}
	require.NoError(t, other.Unlock(octx))
	assert.Zero(t, clients[0].TrackedHolds())
}

func TestRedLockWorksWithTwoOfFiveMastersKilled(t *testing.T) {
	srvs := masters(t, 5)
	clients := process(t, srvs)
	srvs[1].Kill()
	srvs[4].Kill()
	r := relock.NewRedLock("k", clients, testNodeTimeout)
	ctx, err := r.TryLock(context.Background(), 0, 0)
	require.NoError(t, err)
	owner := redField(t, clients[0], ctx)
	for _, i := range []int{0, 2, 3} {
		assertHeldBy(t, srvs[i].Client(), "relock:{k}", owner, 1)
	}
	require.NoError(t, r.Unlock(ctx))
	for _, i := range []int{0, 2, 3} {
		assert.Empty(t, hgetall(t, srvs[i].Client(), "relock:{k}"))
		assert.Empty(t, lockKeys(t, srvs[i]))
	}
}

func TestRedLockRefusesWithThreeOfFiveMastersKilled(t *testing.T) {
	srvs := masters(t, 5)
	clients := process(t, srvs)
	for _, i := range []int{0, 2, 3} {
		srvs[i].Kill()
	}
	r := relock.NewRedLock("k", clients, testNodeTimeout, relock.WithRetryDelay(20*time.Millisecond))
	_, err := r.TryLock(context.Background(), 300*time.Millisecond, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	assert.Contains(t, err.Error(), "2 of 5 masters granted, 3 needed")
	for _, i := range []int{1, 4} {
		assert.Empty(t, lockKeys(t, srvs[i]), "the live masters' grants were taken back")
	}
	assert.Zero(t, clients[0].TrackedHolds())
}

// A stopped master (SIGSTOP: the connection stays open, nothing answers)
// delays the caller by the node timeout, not by go-redis's read timeout.
func TestRedLockPausedMasterDoesNotHoldTheCaller(t *testing.T) {
	srvs := masters(t, 3)
	clients := make([]*relock.Client, 3)
	for i, srv := range srvs {
		// Without the node timeout, a call to the paused master would block
		// for this read timeout.
		clients[i] = relock.New(srv.Client(func(o *redis.Options) { o.ReadTimeout = time.Minute }))
		c := clients[i]
		t.Cleanup(func() { _ = c.Close() })
	}
	r := relock.NewRedLock("p", clients, relock.WithNodeTimeout(200*time.Millisecond))
	warm, err := r.Lock(context.Background()) // every master learns the scripts
	require.NoError(t, err)
	require.NoError(t, r.Unlock(warm))

	srvs[2].Pause()
	t.Cleanup(srvs[2].Resume)
	done := make(chan error, 1)
	go func() {
		ctx, err := r.Lock(context.Background())
		if err == nil {
			err = r.Unlock(ctx)
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Lock+Unlock waited for the paused master")
	}
	for _, i := range []int{0, 1} {
		assert.Empty(t, hgetall(t, srvs[i].Client(), "relock:{p}"))
		assert.Empty(t, lockKeys(t, srvs[i]))
	}
}

// The watchdog renews on every master; it keeps the hold while a majority
// renews, and tells the holder once a majority no longer has it.
func TestRedLockWatchdogKeepsAMajorityOrReportsTheLoss(t *testing.T) {
	srvs := masters(t, 5)
	clients := process(t, srvs, relock.WithWatchdogLease(time.Hour)) // ticks only when the test says
	r := relock.NewRedLock("w", clients, testNodeTimeout)
	ctx, err := r.Lock(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, clients[0].WatchedHolds())

	srvs[0].Kill()
	srvs[1].Kill()
	for _, i := range []int{2, 3, 4} {
		require.NoError(t, srvs[i].Client().PExpire(context.Background(), "relock:{w}", time.Minute).Err())
	}
	clients[0].WatchdogTick()
	require.NoError(t, ctx.Err(), "3 of 5 renewed: still held")
	for _, i := range []int{2, 3, 4} {
		assert.Greater(t, pttl(t, srvs[i].Client(), "relock:{w}"), 50*time.Minute, "renewed to the lease")
	}

	// One more master loses it: 2 renewed, 1 gone and 2 unreachable, which
	// may still come back: undecided, so the watchdog retries.
	require.NoError(t, srvs[2].Client().Del(context.Background(), "relock:{w}").Err())
	clients[0].WatchdogTick()
	require.NoError(t, ctx.Err(), "2 renewed, 1 gone, 2 unreachable: not yet decided, retried until the validity ends")
	// The killed masters come back empty: 3 of 5 now say the hold is gone.
	srvs[0].Restart()
	srvs[1].Restart()
	clients[0].WatchdogTick()
	waitDone(t, ctx)
	require.ErrorIs(t, context.Cause(ctx), relock.ErrLockLost)
	require.ErrorIs(t, r.Unlock(ctx), relock.ErrLockLost)
}

// Tokens keep growing across processes, ForceUnlock, lease expiry and masters
// that missed acquisitions.
func TestRedLockTokensStrictlyIncrease(t *testing.T) {
	srvs := masters(t, 3)
	locks := []*relock.RedLock{
		relock.NewRedLock("t", process(t, srvs), testNodeTimeout),
		relock.NewRedLock("t", process(t, srvs), testNodeTimeout),
	}
	var last int64
	take := func(i int, lease time.Duration) context.Context {
		t.Helper()
		ctx, err := locks[i%2].TryLock(context.Background(), 10*time.Second, lease)
		require.NoError(t, err)
		tok, err := locks[i%2].Token(ctx)
		require.NoError(t, err)
		require.Greater(t, tok, last, "acquisition %d", i)
		last = tok
		return ctx
	}
	for i := range 20 {
		ctx := take(i, 0)
		switch i % 4 {
		case 0, 1:
			require.NoError(t, locks[i%2].Unlock(ctx))
		case 2:
			n, err := locks[(i+1)%2].ForceUnlock(context.Background())
			require.NoError(t, err)
			require.Equal(t, 3, n)
		case 3:
			// Let the lease run out instead of unlocking.
			require.NoError(t, locks[i%2].Unlock(ctx))
			lctx := take(i, 100*time.Millisecond)
			<-lctx.Done()
			require.ErrorIs(t, context.Cause(lctx), relock.ErrLockLost)
			require.Eventually(t, func() bool { return allGone(t, srvs, "relock:{t}") }, 5*time.Second, 5*time.Millisecond)
		}
	}
	require.Greater(t, last, int64(20))
}

// The masters' last tokens drift apart when one of them saw acquisitions the
// others missed (or serves a plain Lock of the same name, or its clock runs
// ahead). The token is the largest granted value, and it is raised on the
// granting masters before it is handed out: so a later majority that leaves
// out the master with the largest token still hands out a larger one.
func TestRedLockTokenStaysMonotonicWhenCountersDrift(t *testing.T) {
	srvs := masters(t, 3)
	clients := process(t, srvs)
	r := relock.NewRedLock("d", clients, testNodeTimeout)
	// Master 0 released a hold whose token is far above the clocks (an hour
	// ahead): its tail says so, for the unlock latch's time.
	ahead := time.Now().Add(time.Hour).UnixMicro()
	require.NoError(t, srvs[0].Client().HSet(context.Background(), tailKey("relock:{d}"), "~t", ahead).Err())
	require.NoError(t, srvs[0].Client().PExpire(context.Background(), tailKey("relock:{d}"), defaultLatch).Err())
	ctx, err := r.Lock(context.Background())
	require.NoError(t, err)
	first, err := r.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, ahead+1, first, "above master 0's tail")
	owner := redField(t, clients[0], ctx)
	for _, srv := range srvs {
		h := assertHeldBy(t, srv.Client(), "relock:{d}", owner, 1)
		assert.Equal(t, first, h.token, "every granting master knows the token")
	}
	require.NoError(t, r.Unlock(ctx))
	for _, srv := range srvs {
		assert.Equal(t, first, tailOf(t, srv.Client(), tailKey("relock:{d}"), defaultLatch), "every master's tail keeps it")
	}

	// Now master 0 is held by a plain Lock of another process: the RedLock
	// gets masters 1 and 2 only.
	plain := relock.New(srvs[0].Client())
	t.Cleanup(func() { _ = plain.Close() })
	pctx, err := plain.Lock("d").Lock(context.Background())
	require.NoError(t, err)
	ptok, err := plain.Lock("d").Token(pctx)
	require.NoError(t, err)
	assert.Greater(t, ptok, first, "the plain Lock shares master 0's tail")
	ctx, err = r.TryLock(context.Background(), 0, 0)
	require.NoError(t, err)
	second, err := r.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, first+1, second, "masters 1 and 2 know the first token: the next is above it, not the clock")
	require.NoError(t, r.Unlock(ctx))
	require.NoError(t, plain.Lock("d").Unlock(pctx))
}

func TestRedLockRefusesBadInput(t *testing.T) {
	b := newMini(t)
	c1, c2 := b.newClient(t), relock.New(b.newConn(t))
	t.Cleanup(func() { _ = c2.Close() })
	for name, r := range map[string]*relock.RedLock{
		"no clients":   relock.NewRedLock("x", nil),
		"nil client":   relock.NewRedLock("x", []*relock.Client{c1, nil}),
		"twice":        relock.NewRedLock("x", []*relock.Client{c1, c2, c1}),
		"empty name":   relock.NewRedLock("", []*relock.Client{c1}),
		"node timeout": relock.NewRedLock("x", []*relock.Client{c1}, relock.WithNodeTimeout(0)),
		"drift":        relock.NewRedLock("x", []*relock.Client{c1}, relock.WithClockDrift(-1)),
		"retry":        relock.NewRedLock("x", []*relock.Client{c1}, relock.WithRetryDelay(-time.Second)),
		"nil option":   relock.NewRedLock("x", []*relock.Client{c1}, nil),
	} {
		_, err := r.Lock(context.Background())
		assert.ErrorIs(t, err, relock.ErrInvalidArgument, name)
		assert.ErrorIs(t, r.Unlock(context.Background()), relock.ErrInvalidArgument, name)
		_, err = r.Validity(context.Background())
		assert.ErrorIs(t, err, relock.ErrInvalidArgument, name)
	}
	r := relock.NewRedLock("x", []*relock.Client{c1, c2})
	_, err := r.TryLock(context.Background(), 0, time.Nanosecond)
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	assert.Empty(t, allKeys(t, b.rdb))
}

func allGone(t testing.TB, srvs []*redistest.Server, key string) bool {
	for _, srv := range srvs {
		if len(hgetall(t, srv.Client(), key)) != 0 {
			return false
		}
	}
	return true
}

// Lock's tokens (and so a MultiLock part's) under the same churn: two
// processes, ForceUnlock, lease expiry, and parts taken by a MultiLock.
func TestLockTokensStrictlyIncreaseAcrossForceUnlockAndExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		clients := []*relock.Client{b.newClient(t), relock.New(b.newConn(t))}
		t.Cleanup(func() { _ = clients[1].Close() })
		var last int64
		for i := range 24 {
			c := clients[i%2]
			l := c.Lock("f")
			var ctx context.Context
			var err error
			if i%3 == 0 {
				ctx, err = relock.NewMultiLock(c.Lock("other"), l).TryLock(context.Background(), 5*time.Second, 0)
			} else {
				ctx, err = l.TryLock(context.Background(), 5*time.Second, 0)
			}
			require.NoError(t, err)
			tok, err := l.Token(ctx)
			require.NoError(t, err)
			require.Greater(t, tok, last, "acquisition %d", i)
			last = tok
			switch i % 4 {
			case 0, 1:
				if i%3 == 0 {
					require.NoError(t, relock.NewMultiLock(c.Lock("other"), l).Unlock(ctx))
				} else {
					require.NoError(t, l.Unlock(ctx))
				}
			case 2:
				_, err := clients[(i+1)%2].Lock("f").ForceUnlock(context.Background())
				require.NoError(t, err)
				_, _ = c.Lock("other").ForceUnlock(context.Background())
			case 3:
				_, _ = c.Lock("other").ForceUnlock(context.Background())
				require.NoError(t, l.Unlock(ctx))
				lctx, err := l.TryLock(context.Background(), 5*time.Second, 50*time.Millisecond)
				require.NoError(t, err)
				tok, err := l.Token(lctx)
				require.NoError(t, err)
				require.Greater(t, tok, last)
				last = tok
				b.expire(50 * time.Millisecond)
				require.Eventually(t, func() bool { n, _ := b.rdb.Exists(context.Background(), l.Key()).Result(); return n == 0 },
					5*time.Second, time.Millisecond)
			}
		}
	})
}

// waitDone fails t unless ctx ends within a generous bound.
func waitDone(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the hold's context was not cancelled")
	}
}

// A release that reaches two of three masters late never deletes the same
// owner's next hold there. The owner (from an outer context) unlocks while
// masters 1 and 2 are slow: their proxies hold the release requests longer
// than the node timeout, so Unlock returns with master 0's answer alone, and
// masters 1 and 2 still have the old grant. The owner locks again at once,
// and the late releases land after the new grants. The new hold must survive
// on a majority, its token must be greater than the first hold's, and no
// other process may get the lock while the owner's context is live. In every
// other round master 0 is slow during the re-lock as well, so that the
// re-lock is granted, if at all, by masters 1 and 2 alone: they must not take
// it as a replay of the first grant and hand out its token again.
//
// The first Lock+Unlock teaches every master the scripts, as in any process
// that has used the lock before. Without it the late release would be an
// EVALSHA of a script masters 1 and 2 do not know yet: its NOSCRIPT would
// come back after the caller had given up, go-redis would never send the
// EVAL, and the release the test is about would never run.
//
// The delay (700 ms) is one way and longer than the tests' node timeout
// (500 ms, for loaded machines).
func TestRedLockLateReleaseNeverDeletesTheOwnersNextHold(t *testing.T) {
	const slow = 700 * time.Millisecond
	srvs := masters(t, 3)
	proxies := make([]*redistest.Proxy, len(srvs))
	clients := make([]*relock.Client, len(srvs))
	for i, srv := range srvs {
		proxies[i] = redistest.NewProxy(t, srv.Addr())
		rdb := redis.NewClient(&redis.Options{Addr: proxies[i].Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		clients[i] = relock.New(rdb)
		t.Cleanup(func() { _ = clients[i].Close() })
	}
	r := relock.NewRedLock("late-owner", clients, testNodeTimeout)
	other := relock.NewRedLock("late-owner", process(t, srvs), testNodeTimeout)
	bg := context.Background()
	warm, err := r.Lock(bg)
	require.NoError(t, err)
	require.NoError(t, r.Unlock(warm))
	slowDown := func(d time.Duration, masters ...int) {
		for _, i := range masters {
			proxies[i].SetDelay(d)
		}
	}

	for round := range 4 {
		masterZeroSlow := round%2 == 1
		t.Run(fmt.Sprintf("round %d, master 0 slow %v", round, masterZeroSlow), func(t *testing.T) {
			t.Cleanup(func() { _, _ = other.ForceUnlock(bg) }) // a failed round leaves the lock free
			owner := relock.NewOwner(bg)
			first, err := r.Lock(owner)
			require.NoError(t, err)
			firstToken, err := r.Token(first)
			require.NoError(t, err)

			slowDown(slow, 1, 2)
			_ = r.Unlock(first) // master 0 answers; 1 and 2 time out with the release not yet run
			slowDown(0, 1, 2)
			calm := time.Now() // nothing the proxies read after this is held
			if masterZeroSlow {
				slowDown(slow, 0)
			}
			second, err := r.TryLock(owner, 10*time.Second, 0)
			if masterZeroSlow {
				slowDown(0, 0)
				calm = time.Now()
			}
			require.NoError(t, err)
			secondToken, err := r.Token(second)
			require.NoError(t, err)
			time.Sleep(time.Until(calm.Add(slow + 300*time.Millisecond))) // every held request has landed

			assert.Greater(t, secondToken, firstToken, "the re-lock's token")
			require.NoError(t, second.Err(), "the owner's second hold ended")
			validity, err := r.Validity(second)
			require.NoError(t, err)
			octx, err := other.TryLock(bg, 0, 0)
			if err == nil {
				otherToken, _ := other.Token(octx)
				t.Fatalf("another process got the lock (token %d) while the owner holds it (token %d, first hold's %d, %v of validity left)",
					otherToken, secondToken, firstToken, validity.Round(time.Millisecond))
			}
			require.ErrorIs(t, err, relock.ErrNotObtained)
			held := 0
			for _, srv := range srvs {
				if len(hgetall(t, srv.Client(), "relock:{late-owner}")) > 0 {
					held++
				}
			}
			require.GreaterOrEqual(t, held, 2, "a late release deleted the new grant")
			require.NoError(t, r.Unlock(second))
			require.Eventually(t, func() bool { return allGone(t, srvs, "relock:{late-owner}") }, 5*time.Second, 10*time.Millisecond,
				"the second hold was not released everywhere")
		})
	}
}
