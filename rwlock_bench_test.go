package relock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// mixed runs b.N operations over 16 goroutines; every tenth is a write.
func mixed(b *testing.B, hold time.Duration, read, write func() (func() error, error)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				take := read
				if i%10 == 0 {
					take = write
				}
				unlock, err := take()
				if err != nil {
					b.Error(err)
					return
				}
				if hold > 0 {
					time.Sleep(hold)
				}
				if err := unlock(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// 90% reads, 16 goroutines, on a real redis-server: RWLock against the
// plain Lock, which serialises the reads too. hold=0 measures the locks'
// own cost; hold=1ms a critical section doing work.
//
//	go test -run '^$' -bench 'BenchmarkReadMostly' -benchtime 2000x -count 3 .
func BenchmarkReadMostly(b *testing.B) {
	srv := redistest.Start(b)
	c := relock.New(srv.Client())
	b.Cleanup(func() { _ = c.Close() })
	bg := context.Background()
	for _, hold := range []time.Duration{0, time.Millisecond} {
		b.Run("RWLock/hold="+hold.String(), func(b *testing.B) {
			l := c.RWLock("bench:rw")
			r, w := l.ReadLock(), l.WriteLock()
			mixed(b, hold,
				func() (func() error, error) {
					ctx, err := r.Lock(bg)
					return func() error { return r.Unlock(ctx) }, err
				},
				func() (func() error, error) {
					ctx, err := w.Lock(bg)
					return func() error { return w.Unlock(ctx) }, err
				})
		})
		b.Run("Lock/hold="+hold.String(), func(b *testing.B) {
			l := c.Lock("bench:plain")
			take := func() (func() error, error) {
				ctx, err := l.Lock(bg)
				return func() error { return l.Unlock(ctx) }, err
			}
			mixed(b, hold, take, take)
		})
	}
}
