package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/inspect"
)

// A closed CountDownLatch is a kind of its own under its name: Inspect and
// ListLocks show its count, its channel (inspect.Channels.Latch) tells of the
// CountDown that opens it, and an open latch leaves nothing to show.
func TestInspectCountDownLatch(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	const name = "inspect/latch"
	l := c.CountDownLatch(name)
	set, err := l.TrySetCount(ctx, 2)
	require.NoError(t, err)
	require.True(t, set)
	hctx, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)

	st, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, []inspect.Kind{inspect.KindLock, inspect.KindCountDownLatch}, st.Kinds())
	assert.Equal(t, &inspect.Latch{Key: l.Key(), Count: 2}, st.CountDownLatch)
	sums, err := c.ListLocks(ctx, "inspect/latch")
	require.NoError(t, err)
	require.Len(t, sums, 2)
	assert.Equal(t, inspect.Summary{Name: name, Kind: inspect.KindCountDownLatch, Count: 2}, sums[1])
	assert.Zero(t, sums[0].Count, "a Lock has no count")
	require.NoError(t, c.Lock(name).Unlock(hctx))

	ch, err := c.Channels(name)
	require.NoError(t, err)
	ps := b.rdb.Subscribe(ctx, ch.Latch)
	defer ps.Close()
	_, err = ps.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, l.CountDown(ctx))
	st, err = c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, 1, st.CountDownLatch.Count)
	require.NoError(t, l.CountDown(ctx))
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := ps.ReceiveMessage(rctx)
	require.NoError(t, err)
	assert.Equal(t, ch.Latch, msg.Channel)
	assert.Equal(t, "all", msg.Payload)

	st, err = c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.False(t, st.Exists())
	sums, err = c.ListLocks(ctx, "inspect/latch")
	require.NoError(t, err)
	assert.Empty(t, sums)
}
