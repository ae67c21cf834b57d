package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Writers of one RWLock in separate processes cost Redis a bounded number
// of commands per write acquisition, flat in the number of processes: a
// waiting writer is handed the write hold by the release that frees the
// lock, so no waiter polls and no release wakes more than one. Every Client
// is a process of its own here (its own connections and subscriber).
// Measured: about 14.3 at 4 and at 16 processes; before the hand-over
// (writers woken on a broadcast channel, claims in a sorted set) 47.6 and
// 111.1.
func TestRWHandOverCommandsPerWriteAcquisitionAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	const rounds = 30
	for _, procs := range []int{4, 16} {
		clients := make([]*relock.Client, procs)
		for i := range clients {
			clients[i] = relock.New(srv.Client())
			t.Cleanup(func() { _ = clients[i].Close() })
		}
		// Load the scripts, so that NOSCRIPT replies do not count.
		warm := clients[0].RWLock("warm") // no writer gives up here: abandon's script is not needed
		wctx, err := warm.WriteLock().Lock(context.Background())
		require.NoError(t, err)
		require.NoError(t, warm.WriteLock().Unlock(wctx))
		rctx, err := warm.ReadLock().Lock(context.Background())
		require.NoError(t, err)
		require.NoError(t, warm.ReadLock().Unlock(rctx))

		before := commandTotal(t, srv)
		counter := 0
		done := make(chan struct{})
		for _, c := range clients {
			go func() {
				defer func() { done <- struct{}{} }()
				l := c.RWLock("crowd").WriteLock()
				for range rounds {
					ctx, err := l.Lock(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					v := counter
					time.Sleep(200 * time.Microsecond)
					counter = v + 1
					assert.NoError(t, l.Unlock(ctx))
				}
			}()
		}
		for range clients {
			<-done
		}
		require.Equal(t, procs*rounds, counter, "two writers at once")
		perAcq := float64(commandTotal(t, srv)-before) / float64(procs*rounds)
		t.Logf("%d processes: %.2f commands run by Redis per write acquisition", procs, perAcq)
		assert.LessOrEqual(t, perAcq, 16.0, "%d processes", procs)
	}
}
