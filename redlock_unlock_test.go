package relock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// A RedLock's Unlock succeeds only when a majority of the masters confirmed
// the release: a release that one master of three confirmed, while the two
// others did not answer, leaves those two still granting the hold, so no
// other caller can reach a quorum yet. Unlock then ends the hold and says
// the release is not confirmed (ErrNotConfirmed, ErrUnavailable), and the
// masters that did not answer are released in the background once they
// answer, long before the lease ends. The same holds when none answered.
func TestRedLockUnlockNeedsAMajority(t *testing.T) {
	const lease = 30 * time.Second
	for _, paused := range [][]int{{1, 2}, {0, 1, 2}} {
		srvs := masters(t, 3)
		clients := process(t, srvs)
		r := relock.NewRedLock("release", clients, testNodeTimeout)
		hctx, err := r.TryLock(context.Background(), 0, lease)
		require.NoError(t, err)
		owner := redField(t, clients[0], hctx)
		for _, srv := range srvs {
			assertHeldBy(t, srv.Client(), "relock:{release}", owner, 1)
		}

		for _, i := range paused {
			srvs[i].Pause()
			t.Cleanup(srvs[i].Resume)
		}
		err = r.Unlock(hctx)
		require.ErrorIs(t, err, relock.ErrNotConfirmed, "%d of 3 masters paused", len(paused))
		require.ErrorIs(t, err, relock.ErrUnavailable)
		require.NotErrorIs(t, err, relock.ErrLockLost)
		assert.Contains(t, err.Error(), "confirmed by ")
		assert.ErrorIs(t, context.Cause(hctx), relock.ErrUnlocked, "the hold ended")
		if len(paused) == 2 {
			assert.Empty(t, hgetall(t, srvs[0].Client(), "relock:{release}"), "the master that answered released")
		}

		resumed := time.Now()
		for _, i := range paused {
			srvs[i].Resume()
		}
		other := relock.NewRedLock("release", process(t, srvs), testNodeTimeout)
		octx, err := other.TryLock(context.Background(), 10*time.Second, 0)
		require.NoError(t, err)
		took := time.Since(resumed)
		t.Logf("%d masters paused: another caller held %v after they resumed", len(paused), took)
		assert.Less(t, took, 5*time.Second, "the release was retried, not left to the %v lease", lease)
		require.NoError(t, other.Unlock(octx))
		for _, srv := range srvs {
			assert.Empty(t, hgetall(t, srv.Client(), "relock:{release}"))
		}
	}
}

// The background release of a RedLock Unlock that a majority did not
// confirm retries the whole release, and that alone: each retry asks every
// master once, so a dead master is asked no more often than a live one (no
// retry of the master's own piling up per retry of the release). Once a
// majority confirms, the master that did not is retried on its own until
// it is released, long before the lease ends.
func TestRedLockBackgroundReleaseDoesNotPileUp(t *testing.T) {
	srvs := masters(t, 3)
	scripts := make([]atomic.Int64, len(srvs))
	clients := make([]*relock.Client, len(srvs))
	for i, srv := range srvs {
		rdb := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
		rdb.AddHook(&scriptHook{after: func(int, int) { scripts[i].Add(1) }})
		clients[i] = relock.New(rdb)
		c := clients[i]
		t.Cleanup(func() { _ = c.Close() })
	}
	r := relock.NewRedLock("pile", clients, testNodeTimeout)
	ctx := context.Background()

	hctx, err := r.TryLock(ctx, 0, 20*time.Second)
	require.NoError(t, err)
	srvs[1].Kill()
	srvs[2].Kill()
	var before [3]int64
	for i := range scripts {
		before[i] = scripts[i].Load()
	}
	require.ErrorIs(t, r.Unlock(hctx), relock.ErrNotConfirmed)
	time.Sleep(3 * time.Second) // the background retries run meanwhile: what is measured
	live, dead := scripts[0].Load()-before[0], scripts[1].Load()-before[1]
	t.Logf("release requests in 3 s: %d to the live master, %d to a dead one", live, dead)
	require.GreaterOrEqual(t, live, int64(3), "the release was retried")
	assert.LessOrEqual(t, dead, live+1, "a dead master was asked more often than the live one")

	// A majority confirms; the master that did not (its request cut before
	// it was sent) is released on its own.
	srvs = masters(t, 3)
	faults := redistest.NewConnFaults()
	for i, srv := range srvs {
		rdb := srv.Client()
		if i == 2 {
			rdb.AddHook(faults)
		}
		clients[i] = relock.New(rdb)
		c := clients[i]
		t.Cleanup(func() { _ = c.Close() })
	}
	r = relock.NewRedLock("pile", clients, testNodeTimeout)
	hctx, err = r.TryLock(ctx, 0, 30*time.Second)
	require.NoError(t, err)
	faults.CutBefore(redistest.CommandConn, "EVALSHA", 1)
	unlocked := time.Now()
	require.NoError(t, r.Unlock(hctx))
	require.Equal(t, 1, faults.Cuts())
	require.Eventually(t, func() bool { return len(hgetall(t, srvs[2].Client(), "relock:{pile}")) == 0 },
		5*time.Second, 10*time.Millisecond, "the master that did not confirm is released in the background")
	t.Logf("the third master was released %v after Unlock (lease 30 s)", time.Since(unlocked))
}
