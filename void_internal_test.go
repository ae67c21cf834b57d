package relock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// A lock's void marks (scripts/void_common.lua) are bounded: the last 8
// op ids voided, the oldest pushed out by a ninth. A hash a mark makes
// lives the unlock latch's time; a held lock's hash keeps its own lease.
// A marked op id takes nothing and clears its mark; one pushed out of the
// ring is not fenced any more (the documented limit).
func TestVoidMarksAreBoundedAndClaimedOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := New(rdb, WithUnlockLatch(5*time.Second))
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	l := c.Lock("void")
	owner := c.id + ":voider"
	ops := make([]string, 10)
	for i := range ops {
		ops[i] = c.newOp()
		req := releaseReq{owner: owner, op: c.newOp(), gen: ops[i], final: true, void: true}
		out, err := c.eval(ctx, "release", lockReleaseCall(c, l.keys, owner, req)).Int64()
		require.NoError(t, err)
		assert.Equal(t, int64(-1), out, "nothing held by %s", ops[i])
	}
	ring := rdb.HGet(ctx, l.keys.hash, "~x").Val()
	assert.Equal(t, "\x00"+strings.Join(ops[2:], "\x00")+"\x00", ring, "the last 8 marks")
	ttl := rdb.PTTL(ctx, l.keys.hash).Val()
	assert.True(t, ttl > 4*time.Second && ttl <= 5*time.Second, "a hash the mark made lives the latch's time: %v", ttl)

	acquire := func(op string) []int64 {
		req := acquireReq{owner: owner, op: op, lease: time.Minute}
		res, err := c.eval(ctx, "acquire", lockAcquireCall(c, l.keys, owner, req, false)).Int64Slice()
		require.NoError(t, err)
		return res
	}
	assert.Equal(t, int64(0), acquire(ops[5])[0], "a marked op takes nothing")
	assert.NotContains(t, rdb.HGet(ctx, l.keys.hash, "~x").Val(), ops[5], "its mark is cleared")
	assert.Empty(t, rdb.HGet(ctx, l.keys.hash, owner).Val(), "nothing held")
	assert.Equal(t, int64(1), acquire(ops[0])[0], "an op pushed out of the ring is not fenced")

	// The hold's lease is its own: a mark written while it holds keeps it.
	req := releaseReq{owner: "other", op: c.newOp(), gen: c.newOp(), final: true, void: true}
	_, err := c.eval(ctx, "release", lockReleaseCall(c, l.keys, "other", req)).Int64()
	require.NoError(t, err)
	ttl = rdb.PTTL(ctx, l.keys.hash).Val()
	assert.Greater(t, ttl, 50*time.Second, "the holder's lease (1 min) is kept: %v", ttl)
}

// A Semaphore's marks outlive its state: the hash of a semaphore nobody
// holds any more is removed with its counts, and written back with its
// marks alone, for SEMA_VOID_MS; a marked op takes nothing.
func TestSemaphoreVoidMarksOutliveItsState(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	s := c.Semaphore("void", 1)
	hctx, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	hash := s.semaKeys()[0]
	voided := c.newOp()
	_, err = c.eval(ctx, "release", semaReleaseCall(s, releaseReq{op: c.newOp(), gen: voided, void: true})).Int64()
	require.NoError(t, err)
	require.NoError(t, s.Release(hctx))
	assert.Equal(t, map[string]string{"~x": "\x00" + voided + "\x00"}, rdb.HGetAll(ctx, hash).Val(), "the marks alone")
	ttl := rdb.PTTL(ctx, hash).Val()
	assert.True(t, ttl > 50*time.Second && ttl <= time.Minute, "kept for a minute: %v", ttl)

	req := acquireReq{owner: c.id + ":late", op: voided, lease: time.Minute}
	res, err := c.eval(ctx, "acquire", semaAcquireCall(s, req, 1, 1)).Int64Slice()
	require.NoError(t, err)
	assert.Equal(t, int64(0), res[0], "a marked op takes nothing")
	assert.Zero(t, rdb.Exists(ctx, hash).Val(), "its mark was the last: the hash is gone")
	hctx, err = s.TryAcquire(ctx, 1, 0, 0)
	require.NoError(t, err, "the permit is free")
	require.NoError(t, s.Release(hctx))
}
