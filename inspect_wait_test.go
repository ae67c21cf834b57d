package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/redistest"
)

// holderWait is the WaitsFor of the Lock holder of name (nil: none).
func holderWait(t *testing.T, c *relock.Client, name string) *inspect.Wait {
	t.Helper()
	st, err := c.Inspect(context.Background(), name)
	require.NoError(t, err)
	require.NotNil(t, st.Lock, "%s is held", name)
	require.Len(t, st.Lock.Holders, 1)
	return st.Lock.Holders[0].WaitsFor
}

// Inspect shows that the owner holding one lock waits for another once its
// wait outlasts the detection delay, and shows no wait once it got it.
func TestInspectShowsWhatAHolderWaitsFor(t *testing.T) {
	srv := redistest.Start(t)
	a := relock.New(srv.Client(), relock.WithDeadlockDetection(100*time.Millisecond))
	b := relock.New(srv.Client())
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	hb, err := b.Lock("iw-l2").Lock(context.Background())
	require.NoError(t, err)
	ha, err := a.Lock("iw-l1").Lock(relock.NewOwner(context.Background()))
	require.NoError(t, err)
	assert.Nil(t, holderWait(t, a, "iw-l1"), "A waits for nothing yet")

	start := time.Now()
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ha, 10*time.Second)
		defer cancel()
		h2, err := a.Lock("iw-l2").Lock(ctx)
		if err == nil {
			err = a.Lock("iw-l2").Unlock(h2)
		}
		got <- err
	}()
	var w *inspect.Wait
	require.Eventually(t, func() bool {
		w = holderWait(t, b, "iw-l1") // any Client reads the record
		return w != nil
	}, 3*time.Second, 20*time.Millisecond, "the wait shows within the detection delay and a check")
	assert.Equal(t, &inspect.Wait{Kind: "lock", Name: "iw-l2", Since: w.Since}, w)
	assert.WithinDuration(t, start, w.Since, 500*time.Millisecond)
	assert.Nil(t, holderWait(t, a, "iw-l2"), "B waits for nothing")

	require.NoError(t, b.Lock("iw-l2").Unlock(hb))
	require.NoError(t, <-got)
	assert.Nil(t, holderWait(t, a, "iw-l1"), "the wait ended, and its record with it")
	require.NoError(t, a.Lock("iw-l1").Unlock(ha))
}

// A record whose owner holds what it says it waits for (its wait was
// granted) is not shown, and neither is a record of another shape.
func TestInspectHidesAGrantedOrForeignWaitRecord(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	h, err := c.Lock("iw-g").Lock(context.Background())
	require.NoError(t, err)
	key := "relock:{dl:" + ownerField(t, c, h) + "}"
	require.NoError(t, rdb.Set(context.Background(), key, "1\x00w1\x00lock\x00iw-g", 10*time.Second).Err())
	assert.Nil(t, holderWait(t, c, "iw-g"), "granted")
	require.NoError(t, rdb.Set(context.Background(), key, "not a record", 10*time.Second).Err())
	assert.Nil(t, holderWait(t, c, "iw-g"), "not a record")
	require.NoError(t, rdb.Set(context.Background(), key, "1\x00w1\x00fairlock\x00iw-g", 10*time.Second).Err())
	assert.Equal(t, &inspect.Wait{Kind: "fairlock", Name: "iw-g", Since: time.UnixMilli(1)}, holderWait(t, c, "iw-g"))
	require.NoError(t, c.Lock("iw-g").Unlock(h))
}
