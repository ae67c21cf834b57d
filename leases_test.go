package relock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// TestEachHoldEndsAtItsOwnLease: one Client's leased holds end each at its
// own lease, in lease order whatever order they were taken in, with
// ErrLockLost; a short lease taken after a long one is not kept waiting for
// it (the Client's lease heap re-arms its one timer for the sooner end).
func TestEachHoldEndsAtItsOwnLease(t *testing.T) {
	bk := newReal(t)
	c := bk.newClient(t)
	long, err := c.Lock("lease-long").TryLock(context.Background(), 0, time.Minute)
	require.NoError(t, err)
	leases := []time.Duration{1100 * time.Millisecond, 100 * time.Millisecond, 600 * time.Millisecond}
	holds := make([]context.Context, len(leases))
	taken := make([]time.Time, len(leases))
	for i, lease := range leases {
		taken[i] = time.Now()
		holds[i], err = c.Lock("lease-"+strconv.Itoa(i)).TryLock(context.Background(), 0, lease)
		require.NoError(t, err)
	}
	for _, i := range []int{1, 2, 0} { // by lease
		select {
		case <-holds[i].Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("the hold with a lease of %v has not ended after 10s", leases[i])
		}
		assert.GreaterOrEqual(t, time.Since(taken[i]), leases[i]*9/10, "ended before its lease")
		assert.ErrorIs(t, context.Cause(holds[i]), relock.ErrLockLost)
		for j := range holds {
			if leases[j] > leases[i] {
				assert.NoError(t, holds[j].Err(), "a longer lease ended with the %v one", leases[i])
			}
		}
	}
	require.NoError(t, long.Err(), "the long lease goes on")
	require.NoError(t, c.Lock("lease-long").Unlock(long))
}
