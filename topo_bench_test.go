package relock_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// BenchmarkLockUnlockWatched is the hot path the topology work touched: an
// uncontended Lock (watched: it arms the hold's expiry timer) and Unlock on
// a real redis-server.
func BenchmarkLockUnlockWatched(b *testing.B) {
	srv := redistest.Start(b)
	c := relock.New(srv.Client())
	b.Cleanup(func() { _ = c.Close() })
	l := c.Lock("bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		hctx, err := l.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(hctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatchdogTick1000 renews 1000 watched holds per tick (each renewal
// now also resets the hold's expiry timer).
func BenchmarkWatchdogTick1000(b *testing.B) {
	srv := redistest.Start(b)
	c := relock.New(srv.Client())
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for i := range 1000 {
		if _, err := c.Lock("bench-" + strconv.Itoa(i)).Lock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		c.WatchdogTick()
	}
}
