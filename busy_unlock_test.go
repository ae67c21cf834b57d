package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// An Unlock that Redis answers BUSY (a long script past
// busy-reply-threshold) is ErrNotConfirmed and ErrUnavailable, and its
// release is retried until it gets through: another Client waiting for the
// lock holds it within moments of the script's end, far below the 30 s
// lease the holder had.
func TestUnlockRefusedBusyIsRetriedUntilTheLockIsFree(t *testing.T) {
	srv := redistest.Start(t, "--busy-reply-threshold", "50")
	ctx := context.Background()
	h := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = h.Close() })
	w := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = w.Close() })
	held, err := h.Lock("busy").Lock(ctx)
	require.NoError(t, err)
	got := make(chan granted, 1)
	go func() {
		wctx, err := w.Lock("busy").TryLock(ctx, 20*time.Second, 0)
		got <- granted{wctx, err}
	}()
	require.Eventually(t, func() bool { return w.SubscribedChannels() == 1 }, 5*time.Second, 5*time.Millisecond)

	scriptEnded, _ := busyFor(t, srv, time.Second)
	err = h.Lock("busy").Unlock(held)
	assert.ErrorIs(t, err, relock.ErrNotConfirmed)
	assert.ErrorIs(t, err, relock.ErrUnavailable)
	scriptEnded()
	ended := time.Now()
	select {
	case g := <-got:
		require.NoError(t, g.err)
		took := time.Since(ended)
		t.Logf("the waiter held %v after the script ended", took)
		require.Less(t, took, 3*time.Second, "the release was not retried: the waiter took the lease fallback")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock 10 s after the script ended (the holder's lease: 30 s)")
	}
}
