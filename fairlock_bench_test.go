package relock_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// contended runs b.N acquisitions of one lock over `workers` goroutines, each
// holding it for `hold`, and reports throughput against the ideal (the lock
// never idle: the sum of the hold times) and the spread of acquisitions per
// goroutine (a fair lock keeps it near zero).
func contended(b *testing.B, workers int, hold time.Duration,
	lock func(context.Context) (context.Context, error), unlock func(context.Context) error) {
	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	counts := make([]int64, workers)
	var held atomic.Int64 // ns spent holding the lock
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for remaining.Add(-1) >= 0 {
				ctx, err := lock(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				t0 := time.Now()
				time.Sleep(hold)
				held.Add(int64(time.Since(t0)))
				counts[g]++
				if err := unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(held.Load())/float64(elapsed), "of-ideal")
	mean := float64(b.N) / float64(workers)
	var lo, hi int64 = math.MaxInt64, 0
	var sq float64
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
		sq += (float64(n) - mean) * (float64(n) - mean)
	}
	b.ReportMetric(math.Sqrt(sq/float64(workers))/mean, "spread-cv")
	b.ReportMetric(float64(lo)/mean, "min/mean")
	b.ReportMetric(float64(hi)/mean, "max/mean")
}

// 16 goroutines on one lock, 1 ms each, on a real redis-server: FairLock
// against the plain Lock.
//
//	go test -run '^$' -bench 'BenchmarkFairness' -benchtime 2000x -count 3 .
func BenchmarkFairness(b *testing.B) {
	srv := redistest.Start(b)
	c := relock.New(srv.Client())
	b.Cleanup(func() { _ = c.Close() })
	b.Run("FairLock", func(b *testing.B) {
		l := c.FairLock("bench:fair")
		contended(b, 16, time.Millisecond, l.Lock, l.Unlock)
	})
	b.Run("Lock", func(b *testing.B) {
		l := c.Lock("bench:lock")
		contended(b, 16, time.Millisecond, l.Lock, l.Unlock)
	})
}
