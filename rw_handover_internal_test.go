package relock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// A writer that gives up after a release handed it the write hold (the
// grant crossed its decision to leave) releases that hold in its abandon,
// handing the lock on: here to the next queued writer.
func TestRWAbandonReleasesACrossedGrant(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	rw := c.RWLock("crossed")
	reader := rw.ReadLock().m
	writer := rw.WriteLock().m
	rreq := acquireReq{owner: c.id + ":r", op: c.newOp(), lease: time.Minute}
	a, err := reader.acquire(ctx, rreq)
	require.NoError(t, err)
	require.Equal(t, acquired, a.outcome)

	// Two writers of this Client queue; its hand-over channel is listened
	// to (here by a plain subscription), so the release grants the first.
	ps := rdb.Subscribe(ctx, rw.keys.waitChannel)
	t.Cleanup(func() { _ = ps.Close() })
	_, err = ps.Receive(ctx)
	require.NoError(t, err)
	first := acquireReq{owner: c.id + ":w1", op: c.newOp(), lease: time.Minute, waiter: true}
	second := acquireReq{owner: c.id + ":w2", op: c.newOp(), lease: time.Minute, waiter: true}
	for _, r := range []acquireReq{first, second} {
		a, err = writer.acquire(ctx, r)
		require.NoError(t, err)
		require.Equal(t, busy, a.outcome)
	}
	out, err := reader.release(ctx, releaseReq{owner: rreq.owner, op: c.newOp(), gen: rreq.op, final: true})
	require.NoError(t, err)
	require.Equal(t, released, out)
	msg, err := ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Contains(t, msg.Payload, first.op+" ", "the grant names the first writer")
	gen, err := rdb.HGet(ctx, rw.keys.hash, "wg:"+first.owner).Result()
	require.NoError(t, err)
	require.Equal(t, first.op, gen, "the hold is named after the waiter")

	writer.traits().queue.leave(ctx, first.owner, first.op, 0)
	msg, err = ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Contains(t, msg.Payload, second.op+" ", "handed on to the second writer")
	h, err := rdb.HGetAll(ctx, rw.keys.hash).Result()
	require.NoError(t, err)
	assert.Empty(t, h["w:"+first.owner])
	assert.Equal(t, "1", h["w:"+second.owner])
	assert.Empty(t, h["~q"], "nobody queued any more")

	// Abandoning again changes nothing.
	writer.traits().queue.leave(ctx, first.owner, first.op, 0)
	h2, err := rdb.HGetAll(ctx, rw.keys.hash).Result()
	require.NoError(t, err)
	assert.Equal(t, h, h2)
}
