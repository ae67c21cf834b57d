package relock_test

import (
	"context"
	"fmt"
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

// The releases that a dead master did not confirm wait for it in one queue
// per master, not one retry each: as Unlocks accumulate, the dead master is
// asked no more often (its Client's retrier sends one request at a time,
// with backoff), and once it answers again every release waiting is sent,
// long before the leases end.
func TestRedLockBackgroundReleaseDoesNotPileUp(t *testing.T) {
	const (
		holds  = 20
		lease  = 20 * time.Second
		window = 3 * time.Second
	)
	srvs := masters(t, 3)
	faults := redistest.NewConnFaults()
	var asked atomic.Int64 // release scripts sent to the dead master
	clients := make([]*relock.Client, len(srvs))
	for i, srv := range srvs {
		rdb := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
		if i == 2 {
			rdb.AddHook(faults)
			rdb.AddHook(&scriptHook{after: func(int, int) { asked.Add(1) }})
		}
		clients[i] = relock.New(rdb)
		c := clients[i]
		t.Cleanup(func() { _ = c.Close() })
	}
	ctx := context.Background()
	locks := make([]*relock.RedLock, holds)
	held := make([]context.Context, holds)
	for i := range locks {
		locks[i] = relock.NewRedLock(fmt.Sprintf("pile:%d", i), clients, testNodeTimeout)
		var err error
		held[i], err = locks[i].TryLock(ctx, 0, lease)
		require.NoError(t, err)
	}

	// Master 2 dies: every request to it fails before it is sent.
	faults.CutBefore(redistest.CommandConn, "EVALSHA", 1<<30)
	before := asked.Load()
	for i, r := range locks {
		require.NoError(t, r.Unlock(held[i]), "a majority confirmed")
	}
	time.Sleep(window)                       // the background retries run meanwhile: what is measured
	retries := asked.Load() - before - holds // less each Unlock's own request
	t.Logf("%d releases waiting: the dead master was asked %d more times in %v", holds, retries, window)
	require.Positive(t, retries, "the releases are retried")
	assert.LessOrEqual(t, retries, int64(12), "one retrier with backoff asks about 8 times in %v, whatever waits", window)

	// Master 2 answers again: every release that waited is sent there.
	faults.StopCutting()
	healed := time.Now()
	rdb := srvs[2].Client()
	require.Eventually(t, func() bool {
		n := 0
		for i := range locks {
			n += len(hgetall(t, rdb, fmt.Sprintf("relock:{pile:%d}", i)))
		}
		return n == 0
	}, 5*time.Second, 10*time.Millisecond, "the dead master's holds are released once it answers, not left to the %v lease", lease)
	t.Logf("all %d released on the master %v after it answered", holds, time.Since(healed).Round(time.Millisecond))
}
