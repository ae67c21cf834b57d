package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
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
