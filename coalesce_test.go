package relock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTrips counts what a go-redis client sends on its command
// connections: single commands and pipelines (round trips), the script
// calls among them, and the largest pipeline.
type roundTrips struct {
	relock.PassHook
	single, pipelines, scripts, largest atomic.Int64
}

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.single.Add(1)
		if cmd.Name() == "evalsha" {
			h.scripts.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// go-redis sends a pipeline of its own when it opens a connection
		// (HELLO, CLIENT SETINFO); only pipelines of script calls count.
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "evalsha" || c.Name() == "eval" }) {
			h.pipelines.Add(1)
		}
		for _, cmd := range cmds {
			if cmd.Name() == "evalsha" {
				h.scripts.Add(1)
			}
		}
		for n := int64(len(cmds)); ; {
			cur := h.largest.Load()
			if n <= cur || h.largest.CompareAndSwap(cur, n) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

func (h *roundTrips) reset() {
	h.single.Store(0)
	h.pipelines.Store(0)
	h.scripts.Store(0)
	h.largest.Store(0)
}

// A lone caller is not coalesced with anything: its Lock+Unlock sends the
// two script calls as two plain commands, as before coalescing, and no
// pipeline — the same round trips, and no wait for a batch.
func TestLoneCallerRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	h := &roundTrips{}
	rdb.AddHook(h)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	for _, k := range exclusiveKinds {
		t.Run(k.name, func(t *testing.T) {
			l := k.open(c, "alone")
			cycle := func() {
				ctx, err := l.Lock(context.Background())
				require.NoError(t, err)
				require.NoError(t, l.Unlock(ctx))
			}
			cycle() // loads the scripts
			h.reset()
			const cycles = 10
			for range cycles {
				cycle()
			}
			assert.Equal(t, int64(2*cycles), h.single.Load(), "round trips of %d Lock+Unlock", cycles)
			assert.Equal(t, int64(2*cycles), h.scripts.Load())
			assert.Zero(t, h.pipelines.Load(), "a lone caller is sent alone")
		})
	}
}

// Goroutines of one Client that lock and unlock at the same time share
// round trips: their script calls go out in pipelines, so far fewer round
// trips than calls, none larger than the batch bound, and every call gets
// its own reply (each goroutine holds its lock as it should).
func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	h := &roundTrips{}
	rdb.AddHook(h)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	warm, err := c.Lock("warm").Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.Lock("warm").Unlock(warm))
	h.reset()
	const goroutines, cycles = 64, 20
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := c.Lock(fmt.Sprintf("k%d", g))
			for range cycles {
				ctx, err := l.Lock(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, int64(1), heldCount(t, rdb, l.Key(), ownerField(t, c, ctx)), "held")
				if !assert.NoError(t, l.Unlock(ctx)) {
					return
				}
			}
		})
	}
	wg.Wait()
	calls := h.scripts.Load()
	trips := h.pipelines.Load() + h.single.Load() - int64(goroutines*cycles) // heldCount's HGETs
	t.Logf("%d script calls in %d round trips (%d pipelines, largest %d)", calls, trips, h.pipelines.Load(), h.largest.Load())
	assert.Equal(t, int64(2*goroutines*cycles), calls)
	assert.Less(t, trips, calls*3/4, "concurrent calls share round trips")
	assert.LessOrEqual(t, h.largest.Load(), int64(relock.CoalesceMaxBatch), "bounded batches")
}

func heldCount(t testing.TB, rdb redis.UniversalClient, key, field string) int64 {
	n, err := rdb.HGet(context.Background(), key, field).Int64()
	require.NoError(t, err)
	return n
}

// On a Cluster, a batch of calls on keys of every node reaches each node:
// go-redis's Cluster pipeline splits it by slot. Every goroutine's lock is
// held on its own key's node.
func TestCoalescedCallsOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	rdb := cl.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	h := &roundTrips{}
	rdb.AddHook(h)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	const goroutines, cycles = 32, 10
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := c.Lock(fmt.Sprintf("k%d", g))
			for range cycles {
				ctx, err := l.Lock(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				node, err := cl.MasterOf(context.Background(), l.Key())
				if assert.NoError(t, err) {
					assert.Equal(t, int64(1), heldCount(t, node.Client(), l.Key(), ownerField(t, c, ctx)), "held on its node")
				}
				if !assert.NoError(t, l.Unlock(ctx)) {
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d script calls, %d pipelines, largest %d", h.scripts.Load(), h.pipelines.Load(), h.largest.Load())
	assert.Positive(t, h.pipelines.Load(), "calls were coalesced")
}
