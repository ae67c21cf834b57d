package relock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// A waiter that gets its grant long after its last attempt claims it with an
// attempt under the same op id, and counts the hold's end from that
// attempt's start: the attempt (a replay of the grant) must give the hold
// its full lease from now, or the waiter would believe in a lease Redis does
// not have. Every handing scheme: Lock, FairLock, an RWLock's writers.
func TestClaimingAGrantRenewsItsLease(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	rw := c.RWLock("claim")
	for _, tc := range []struct {
		name string
		s    scheme
		hash string
		// deadline is the hold's own deadline field, for a kind that has one.
		deadline string
	}{
		{"Lock", lockScheme{c.Lock("claim")}, c.Lock("claim").keys.hash, ""},
		{"FairLock", fairScheme{c.FairLock("claim")}, c.FairLock("claim").keys.hash, ""},
		{"WriteLock", rw.WriteLock().m, rw.keys.hash, "wd:" + c.id + ":w"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			req := acquireReq{owner: c.id + ":w", op: c.newOp(), lease: 300 * time.Millisecond, waiter: true}
			a, err := tc.s.acquire(ctx, req) // stands for the hand-over's grant
			require.NoError(t, err)
			require.Equal(t, acquired, a.outcome)

			req.lease = 30 * time.Second
			a, err = tc.s.acquire(ctx, req) // the claim: same op, later
			require.NoError(t, err)
			require.Equal(t, acquired, a.outcome, "the claim is a replay of the grant")
			pttl, err := srv.Client().PTTL(ctx, tc.hash).Result()
			require.NoError(t, err)
			assert.Greater(t, pttl, 29*time.Second, "the claim gave the hold its lease from now")
			if tc.deadline != "" {
				dl, err := srv.Client().HGet(ctx, tc.hash, tc.deadline).Int64()
				require.NoError(t, err)
				assert.Greater(t, dl, time.Now().Add(29*time.Second).UnixMilli(), "the holder's own deadline too")
			}

			// A claim never shortens a longer lease.
			req.lease = time.Second
			_, err = tc.s.acquire(ctx, req)
			require.NoError(t, err)
			pttl, err = srv.Client().PTTL(ctx, tc.hash).Result()
			require.NoError(t, err)
			assert.Greater(t, pttl, 28*time.Second)
		})
	}
}
