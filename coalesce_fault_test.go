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

// A paused Cluster master holds up nothing of the healthy masters': two
// Locks on its keys give up at their deadlines while their requests hang
// until go-redis's read timeout, and then a Lock and an Unlock on a healthy
// master's keys are answered at once, as they would be from a Client that
// never used the paused master.
func TestHungClusterNodeHoldsUpNoOther(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, "--cluster-require-full-coverage", "no")
	rdb := cl.Client()
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := exclusiveKinds[0]
	names := namesPerMaster(t, cl, c, k, "hung", 3)
	masters, err := cl.Masters(ctx)
	require.NoError(t, err)
	hung, healthy := masters[0], masters[1]
	for _, m := range masters { // every master has the scripts loaded
		name := names[m.Addr()][0]
		hold, err := c.Lock(name).Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, c.Lock(name).Unlock(hold))
	}
	heldName := names[healthy.Addr()][1]
	held, err := c.Lock(heldName).Lock(ctx)
	require.NoError(t, err)

	hung.Pause()
	t.Cleanup(hung.Resume) // before c.Close, which waits for the requests in flight
	for _, name := range names[hung.Addr()][1:] {
		lctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := c.Lock(name).Lock(lctx)
		cancel()
		require.ErrorIs(t, err, relock.ErrNotObtained, "the paused master does not answer")
	}

	node := healthy.Client()
	start := time.Now()
	err = c.Lock(heldName).Unlock(held)
	took := time.Since(start)
	assert.NoError(t, err, "a healthy master's Unlock is confirmed (after %v)", took)
	assert.Less(t, took, 500*time.Millisecond)
	assert.Empty(t, owners(t, node, k.keyOf(c, heldName)), "released on its master")

	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start = time.Now()
	name := names[healthy.Addr()][2]
	hold, err := c.Lock(name).Lock(lctx)
	took = time.Since(start)
	require.NoError(t, err, "a healthy master's Lock waits for nothing of the paused one's (after %v)", took)
	assert.Less(t, took, 500*time.Millisecond)
	assert.Equal(t, "1", owners(t, node, k.keyOf(c, name))[ownerField(t, c, hold)], "held on its master")
	require.NoError(t, c.Lock(name).Unlock(hold))
}

// A call without a deadline is bounded by go-redis's own timeouts counting
// its time queued in the Client: with Redis paused and every go-redis
// timeout 300 ms, a thousand TryLocks without a deadline, on a thousand
// keys, all fail within the pool timeout (their wait for a send) plus one
// command's pool, dial, write and read timeouts, not in waves of read
// timeouts.
func TestQueuedCallsWithoutDeadlineBoundedByGoRedis(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 300 * time.Millisecond
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr(), DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		PoolTimeout: timeout, MaxRetries: -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	warm, err := c.Lock("warm").Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Lock("warm").Unlock(warm))

	srv.Pause()
	t.Cleanup(srv.Resume)
	const callers = 1000
	took := make([]time.Duration, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			start := time.Now()
			_, err := c.Lock(fmt.Sprint("q", i)).TryLock(ctx, 0, 0)
			took[i] = time.Since(start)
			assert.ErrorIs(t, err, relock.ErrUnavailable)
		})
	}
	wg.Wait()
	slices.Sort(took)
	t.Logf("p50 %v, p99 %v, max %v", took[callers/2], took[callers*99/100], took[callers-1])
	bound := timeout + 4*timeout // queued, then one command's pool wait, dial, write, read
	assert.Less(t, took[callers-1], bound+200*time.Millisecond, "every call returns by go-redis's own timeouts")
}

// A call is never cut at another call's deadline: with replies 600 ms late
// and both sends of the Client in flight, Unlock A (started at 50 ms) and
// Unlock B (at 450 ms) leave in one batch at 600 ms. A's bound (1,050 ms)
// passes first, and A alone returns then, not confirmed; B is confirmed
// when the reply comes (about 1,200 ms), inside its own bound (1,450 ms).
func TestBatchedReleaseNotCutAtAnothersDeadline(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb, relock.WithUnlockTimeout(time.Second))
	t.Cleanup(func() { _ = c.Close() })
	direct := srv.Client()
	ctx := context.Background()
	warm, err := c.Lock("warm").Lock(ctx) // the scripts are loaded
	require.NoError(t, err)
	require.NoError(t, c.Lock("warm").Unlock(warm))
	a, b := c.Lock("a"), c.Lock("b")
	holdA, err := a.Lock(ctx)
	require.NoError(t, err)
	holdB, err := b.Lock(ctx)
	require.NoError(t, err)

	var conns []*redis.Conn // open the connections the sends will use before replies are late
	for range 4 {
		conn := rdb.Conn()
		require.NoError(t, conn.Ping(ctx).Err())
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		require.NoError(t, conn.Close())
	}
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() }) // and a batch's
	require.NoError(t, err)
	const delay = 600 * time.Millisecond
	proxy.SetReplyDelay(delay)
	start := time.Now()
	var wg sync.WaitGroup
	others := []string{"x", "y"}
	otherHolds := make([]context.Context, len(others))
	for i, name := range others { // they take both sends until their replies come
		wg.Go(func() {
			hold, err := c.Lock(name).Lock(ctx)
			assert.NoError(t, err)
			otherHolds[i] = hold
		})
	}
	require.Eventually(t, func() bool {
		n, err := direct.Exists(ctx, c.Lock("x").Key(), c.Lock("y").Key()).Result()
		return err == nil && n == 2
	}, time.Second, time.Millisecond, "both Locks are in flight")
	t.Logf("both in flight after %v", time.Since(start))
	var errA, errB error
	var tookA, tookB time.Duration
	wg.Go(func() {
		time.Sleep(50*time.Millisecond - time.Since(start))
		s := time.Now()
		errA = a.Unlock(holdA)
		tookA = time.Since(s)
	})
	time.Sleep(450*time.Millisecond - time.Since(start))
	s := time.Now()
	errB = b.Unlock(holdB)
	tookB = time.Since(s)
	proxy.SetReplyDelay(0)
	wg.Wait()
	for i, name := range others {
		if otherHolds[i] != nil {
			assert.NoError(t, c.Lock(name).Unlock(otherHolds[i]))
		}
	}
	t.Logf("A: %v after %v; B: %v after %v", errA, tookA, errB, tookB)
	require.NoError(t, errB, "B's reply came inside B's own bound")
	assert.Empty(t, owners(t, direct, b.Key()), "B released")
	assert.Less(t, tookB, time.Second+100*time.Millisecond, "B returns by its own bound")
	require.ErrorIs(t, errA, relock.ErrNotConfirmed, "A's bound passed before the reply")
	assert.Less(t, tookA, time.Second+100*time.Millisecond, "A returns by its own bound")
	assert.Eventually(t, func() bool { return len(owners(t, direct, a.Key())) == 0 }, 2*time.Second, 10*time.Millisecond, "A released")
}
