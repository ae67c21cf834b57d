package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// A waiting reader must not sleep past the write hold it waits behind, even
// when that hold is handed over to a writer with a shorter lease. H writes
// with the watchdog's 30 s lease; a reader R (its own Client) waits and
// sleeps on H's lease; a writer W (its own Client, 300 ms lease) is queued.
// H's release hands the write hold to W, whose lease then runs out with
// nobody releasing: the hash expires and nothing is published. R must read
// within a moment of W's lease end, not at its fallback (H's 30 s lease),
// which would leave readers asleep while the lock is free.
func TestRWReaderWokenOnHandOverToShorterWriteLease(t *testing.T) {
	srv := redistest.Start(t)
	const name = "rw-shorter"
	const leaseW = 300 * time.Millisecond
	h := relock.New(srv.Client())
	w := relock.New(srv.Client())
	r := relock.New(srv.Client())
	t.Cleanup(func() { _ = h.Close(); _ = w.Close(); _ = r.Close() })
	l := h.RWLock(name)

	hctx, err := l.WriteLock().Lock(context.Background()) // the watchdog's lease
	require.NoError(t, err)
	read := make(chan granted, 1)
	go func() {
		ctx, err := r.RWLock(name).ReadLock().TryLock(context.Background(), 20*time.Second, 0)
		read <- granted{ctx, err}
	}()
	wrote := make(chan granted, 1)
	go func() {
		ctx, err := w.RWLock(name).WriteLock().TryLock(context.Background(), 20*time.Second, leaseW)
		wrote <- granted{ctx, err}
	}()
	require.Eventually(t, func() bool { return writersQueued(t, srv.Client(), l) == 1 }, 5*time.Second, time.Millisecond)
	quiet(t, srv) // R and W sleep on H's lease

	released := time.Now()
	require.NoError(t, l.WriteLock().Unlock(hctx))
	mustGet(t, wrote, 3*time.Second) // W holds for leaseW and never unlocks
	rctx := mustGet(t, read, 2*time.Second+leaseW)
	took := time.Since(released)
	t.Logf("R read %v after H's release (W's lease: %v)", took, leaseW)
	require.Less(t, took, 2*time.Second+leaseW, "the reader took the fallback")
	require.NoError(t, r.RWLock(name).ReadLock().Unlock(rctx))
}
