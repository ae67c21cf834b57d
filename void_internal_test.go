package relock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// An exclusive lock's final release records the generation it freed (~f):
// an acquire whose op id is that generation — a copy of the request that
// started the hold — takes nothing, whether the lock is free or held by
// another since; any other op id acquires as before. Only the last freed
// generation is kept (the documented limit). For Lock, FairLock and a
// MultiLock's parts.
func TestFreedGenerationTakesNothing(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	owner := c.id + ":copier"
	type kind struct {
		name    string
		acquire func(op string) int64
		release func(gen string)
	}
	l, f := c.Lock("freed"), c.FairLock("freed")
	a, b := c.Lock("freed:a"), c.Lock("freed:b")
	multi := []lockKeys{a.keys, b.keys}
	kinds := []kind{
		{"Lock", func(op string) int64 {
			res, err := c.eval(ctx, "acquire", lockAcquireCall(c, l.keys, owner, acquireReq{owner: owner, op: op, lease: time.Minute}, false)).Int64Slice()
			require.NoError(t, err)
			return res[0]
		}, func(gen string) {
			_, err := c.eval(ctx, "release", lockReleaseCall(c, l.keys, owner, releaseReq{owner: owner, op: c.newOp(), gen: gen, final: true})).Int64()
			require.NoError(t, err)
		}},
		{"FairLock", func(op string) int64 {
			res, err := c.eval(ctx, "acquire", fairAcquireCall(c, f.keys, acquireReq{owner: owner, op: op, lease: time.Minute})).Int64Slice()
			require.NoError(t, err)
			return res[0]
		}, func(gen string) {
			_, err := c.eval(ctx, "release", fairReleaseCall(c, f.keys, releaseReq{owner: owner, op: c.newOp(), gen: gen, final: true})).Int64()
			require.NoError(t, err)
		}},
		{"MultiLock", func(op string) int64 {
			res, err := c.eval(ctx, "acquire", multiAcquireCall(c, multi, []string{"", ""}, owner, op, time.Minute)).Int64Slice()
			require.NoError(t, err)
			return res[0]
		}, func(gen string) {
			_, err := c.eval(ctx, "release", multiReleaseCall(c, multi, []string{gen, gen}, []bool{true, true}, owner, c.newOp())).Int64Slice()
			require.NoError(t, err)
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			first, second := c.newOp(), c.newOp()
			require.Equal(t, int64(1), k.acquire(first))
			k.release(first)
			assert.Equal(t, int64(0), k.acquire(first), "a copy of the freed hold's request takes nothing")
			require.Equal(t, int64(1), k.acquire(second), "another op id acquires")
			assert.Equal(t, int64(0), k.acquire(first), "nor while another hold holds")
			k.release(second)
			assert.Equal(t, int64(1), k.acquire(first), "a copy older than the last release is not fenced")
			k.release(first)
		})
	}
}

// go-redis sends a command again on a read timeout unless MaxRetries is
// negative; relock judges a grant by the read timeout of the client it
// went on, and not at all where there is none or no retry.
func TestCopyRiskFollowsGoRedisRetries(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts redis.Options
		want time.Duration
	}{
		{"Defaults", redis.Options{}, 3 * time.Second},
		{"ReadTimeout", redis.Options{ReadTimeout: 200 * time.Millisecond}, 200 * time.Millisecond},
		{"NoRetries", redis.Options{MaxRetries: -1}, 0},
		{"NoReadTimeout", redis.Options{ReadTimeout: -1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Addr = "127.0.0.1:1" // never dialed
			rdb := redis.NewClient(&tc.opts)
			t.Cleanup(func() { _ = rdb.Close() })
			assert.Equal(t, tc.want, copyRiskOf(rdb).read)
		})
	}
}
