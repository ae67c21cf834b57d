package relock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// A waiting writer whose grant reaches it long after its last attempt
// claims it with an attempt under its waiter id: a replay of the grant,
// which gives the write hold its lease from now.
func TestRWClaimingAGrantRenewsItsLease(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	w := c.RWLock("claim").WriteLock().m
	ctx := context.Background()
	req := acquireReq{owner: c.id + ":w", op: c.newOp(), lease: 300 * time.Millisecond, waiter: true}
	a, err := w.acquire(ctx, req) // stands for the hand-over's grant
	require.NoError(t, err)
	require.Equal(t, acquired, a.outcome)

	req.lease = 30 * time.Second
	a, err = w.acquire(ctx, req) // the claim: same op, later
	require.NoError(t, err)
	require.Equal(t, acquired, a.outcome, "the claim is a replay of the grant")
	pttl, err := srv.Client().PTTL(ctx, w.l.keys.hash).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, 29*time.Second, "the claim gave the hold its lease from now")
	dl, err := srv.Client().HGet(ctx, w.l.keys.hash, "wd:"+req.owner).Int64()
	require.NoError(t, err)
	assert.Greater(t, dl, time.Now().Add(29*time.Second).UnixMilli(), "the holder's own deadline too")
}

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

	writer.abandon(ctx, first.owner, first.op)
	msg, err = ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Contains(t, msg.Payload, second.op+" ", "handed on to the second writer")
	h, err := rdb.HGetAll(ctx, rw.keys.hash).Result()
	require.NoError(t, err)
	assert.Empty(t, h["w:"+first.owner])
	assert.Equal(t, "1", h["w:"+second.owner])
	assert.Empty(t, h["~q"], "nobody queued any more")

	// Abandoning again changes nothing.
	writer.abandon(ctx, first.owner, first.op)
	h2, err := rdb.HGetAll(ctx, rw.keys.hash).Result()
	require.NoError(t, err)
	assert.Equal(t, h, h2)
}
