package relock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// On a Redis Cluster, the watchdog renews a Semaphore's permits (its batch
// names the hash; the holds' sorted set beside it shares the slot), and
// Inspect reads the holds and waiters from the sorted sets: for names on
// every master.
func TestClusterSemaphoreRenewedAndInspected(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	const lease = 600 * time.Millisecond
	rdb := cl.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb, relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	var holds []context.Context
	var sems []*relock.Semaphore
	for i := range 6 {
		s := c.Semaphore(fmt.Sprintf("renew/%d", i), 2)
		h, err := s.Acquire(ctx, 1)
		require.NoError(t, err)
		holds, sems = append(holds, h), append(sems, s)
	}
	time.Sleep(4 * lease) // the leases would have ended four times over
	for i, s := range sems {
		require.NoError(t, context.Cause(holds[i]), "the watchdog renewed the permits")
		st, err := s.State(ctx)
		require.NoError(t, err)
		assert.Equal(t, relock.SemaphoreState{Permits: 2, Used: 1, Holds: 1}, st)
		insp, err := c.Inspect(ctx, fmt.Sprintf("renew/%d", i))
		require.NoError(t, err)
		require.NotNil(t, insp.Semaphore)
		require.Len(t, insp.Semaphore.Holders, 1)
		assert.Equal(t, 1, insp.Semaphore.Holders[0].Count)
		assert.Positive(t, insp.Semaphore.Holders[0].Lease)
		require.NoError(t, s.Release(holds[i]))
	}
}
