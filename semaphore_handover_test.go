package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// H (30 s watchdog lease) hands the only permit to W1, whose lease is
// 300 ms; W2, queued behind, slept on H's lease (its fallback poll is 20 s
// away). When W1's lease runs out nothing is published: W2 must be served
// within a moment of that, not at its fallback.
func TestSemaphoreNoOversleepAfterHandOverToShorterLease(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	const leaseW1 = 300 * time.Millisecond
	sh := b.newClient(t).Semaphore("short", 1)
	s1 := b.newClient(t).Semaphore("short", 1)
	s2 := b.newClient(t, farWaiter...).Semaphore("short", 1)
	hctx, err := sh.Acquire(ctx, 1)
	require.NoError(t, err)

	got1 := make(chan granted, 1)
	go func() {
		h, err := s1.TryAcquire(ctx, 1, relock.WaitForever, leaseW1)
		got1 <- granted{h, err}
	}()
	requireWaiters(t, sh, 1)
	got2 := acquireAsync(s2, 1)
	requireWaiters(t, sh, 2)
	require.Eventually(t, func() bool {
		chans, err := b.rdb.PubSubChannels(ctx, sh.Key()+":w:*").Result()
		return err == nil && len(chans) == 2
	}, 5*time.Second, time.Millisecond, "both waiters listen")

	require.NoError(t, sh.Release(hctx))
	ctx1 := mustGet(t, got1, 2*time.Second)
	leaseEnd := time.Now().Add(leaseW1) // at the latest: the lease counts from the grant
	ctx2 := mustGet(t, got2, 10*time.Second)
	late := time.Since(leaseEnd)
	t.Logf("W2 was served %v after W1's lease ended", late)
	assert.Less(t, late, time.Second, "W2 overslept W1's lease (its fallback)")
	assert.ErrorIs(t, context.Cause(ctx1), relock.ErrLockLost, "W1's lease ran out")
	require.NoError(t, s2.Release(ctx2))
	requireOnlyExpiringLeftovers(t, b.rdb)
}
