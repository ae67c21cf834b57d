package relock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// A MultiLock waiting on a part that is handed over to a waiter with a short
// lease re-checks on "handed", so it sleeps on the new
// holder's lease and has the lock within a moment of that lease's end, not
// at the 30 s lease of the holder it first waited on, after which nothing is
// published.
func TestMultiLockRechecksWhenAPartIsHandedOver(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	const leaseW = 300 * time.Millisecond
	h, cw, cm := New(rdb), New(srv.Client()), New(srv.Client())
	t.Cleanup(func() { _ = h.Close(); _ = cw.Close(); _ = cm.Close() })
	a := h.Lock("multi-handed-a")
	hctx, err := a.Lock(context.Background())
	require.NoError(t, err)

	type result struct {
		ctx context.Context
		err error
	}
	gotW, gotM := make(chan result, 1), make(chan result, 1)
	go func() {
		ctx, err := cw.Lock("multi-handed-a").TryLock(context.Background(), WaitForever, leaseW)
		gotW <- result{ctx, err}
	}()
	require.Eventually(t, func() bool {
		q, _ := rdb.HGet(context.Background(), a.keys.hash, "~q").Result()
		return q != ""
	}, 5*time.Second, time.Millisecond, "W queued")
	m := NewMultiLock(cm.Lock("multi-handed-a"), cm.Lock("multi-handed-b"))
	go func() {
		ctx, err := m.Lock(context.Background())
		gotM <- result{ctx, err}
	}()
	asleep(t, cm, a.keys.channel) // after its attempt that followed the subscription

	unlocked := time.Now()
	require.NoError(t, a.Unlock(hctx))
	select {
	case r := <-gotW:
		require.NoError(t, r.err)
	case <-time.After(2 * time.Second):
		t.Fatal("W was not handed the lock")
	}
	var mctx context.Context
	select {
	case r := <-gotM:
		require.NoError(t, r.err)
		mctx = r.ctx
	case <-time.After(10 * time.Second):
		t.Fatal("the MultiLock overslept the receiver's lease")
	}
	elapsed := time.Since(unlocked)
	t.Logf("MultiLock got the lock %v after the hand-over (the receiver's lease %v)", elapsed, leaseW)
	assert.Less(t, elapsed, leaseW+2*time.Second, "the MultiLock overslept the receiver's lease")
	require.NoError(t, m.Unlock(mctx))
}
