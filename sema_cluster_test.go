package relock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// On a Redis Cluster, a Semaphore and a CountDownLatch of any name live in
// one slot each, and their waiters are served by the release through the
// shared subscriber (sharded pub/sub, and classic pub/sub, which counts one
// node's receivers only).
func TestClusterSemaphoreAndLatch(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	for _, sharded := range []bool{true, false} {
		t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
			clients := make([]*relock.Client, 3)
			for i := range clients {
				rdb := cl.Client()
				c := relock.New(rdb, relock.WithShardedPubSub(sharded))
				t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
				clients[i] = c
			}
			ctx := context.Background()
			if sharded && !redistest.ShardedPubSub(ctx, cl.Client()) {
				// Redis 6.2: forced sharded pub/sub is refused at the first call.
				_, err := clients[0].Semaphore("cl/unsupported", 1).TryAcquire(ctx, 1, 0, 0)
				require.ErrorIs(t, err, relock.ErrUnsupported)
				return
			}
			for i := range 6 { // names over every master
				name := fmt.Sprintf("cl/{odd}%d}", i)
				clusterSemaphoreHandOver(t, clients, name)
				latch := clients[0].CountDownLatch(name)
				_, err := latch.TrySetCount(ctx, 2)
				require.NoError(t, err)
				opened := make(chan error, 1)
				go func() { opened <- clients[1].CountDownLatch(name).Wait(ctx) }()
				require.NoError(t, clients[2].CountDownLatch(name).CountDown(ctx))
				require.NoError(t, clients[0].CountDownLatch(name).CountDown(ctx))
				select {
				case err := <-opened:
					require.NoError(t, err)
				case <-time.After(5 * time.Second):
					t.Fatal("the latch's waiter was not woken")
				}
			}
			keys := 0
			require.NoError(t, cl.Client().ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				ks, err := m.Keys(ctx, "relock:*").Result()
				for _, k := range ks {
					if !leftover(t, m, k) && !latchMark(k) {
						keys++
					}
				}
				return err
			}))
			assert.Zero(t, keys, "nothing left but release latches")
		})
	}
}

// clusterSemaphoreHandOver: 2 permits, a waiter on another Client served by
// the release within a fraction of the lease.
func clusterSemaphoreHandOver(t *testing.T, clients []*relock.Client, name string) {
	t.Helper()
	ctx := context.Background()
	s := clients[0].Semaphore(name, 2)
	h, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	got := acquireAsync(clients[1].Semaphore(name, 2), 1)
	require.Eventually(t, func() bool {
		st, err := s.State(ctx)
		return err == nil && st.Waiters == 1
	}, 5*time.Second, 5*time.Millisecond)
	released := time.Now()
	require.NoError(t, s.Release(h))
	wctx := mustGet(t, got, 5*time.Second)
	assert.Less(t, time.Since(released), 2*time.Second, "served by the release")
	require.NoError(t, clients[1].Semaphore(name, 2).Release(wctx))
}
