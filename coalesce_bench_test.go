package relock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// BenchmarkSharedClient is the comparison benchmark's scenario 6 in the
// root module: 64 goroutines, each on its own lock, share one Client on a
// real Redis, so that their script calls are coalesced. ns/op and allocs/op
// are per Lock+Unlock cycle, all goroutines together. detached: a default
// go-redis client (Unlock's release on a goroutine of relock's); inline:
// one with ContextTimeoutEnabled (the release on the caller's, see
// inline.go). It reports, per cycle, the CPU time Redis used (INFO cpu) and
// the test process used (getrusage), and the coalescer's batch size achieved
// (script calls per send).
func BenchmarkSharedClient(b *testing.B) {
	srv := redistest.Start(b)
	admin := srv.Client()
	for _, mode := range []string{"detached", "inline"} {
		b.Run(mode, func(b *testing.B) {
			rdb := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = mode == "inline" })
			c := relock.New(rdb)
			b.Cleanup(func() { _ = c.Close() })
			redis0, client0 := relock.RedisCPU(b, admin), processCPU()
			sends0, calls0 := c.CoalesceStats()
			sharedClientCycles(b, c)
			n := float64(b.N)
			b.ReportMetric((relock.RedisCPU(b, admin)-redis0).Seconds()*1e6/n, "redis-µs/op")
			b.ReportMetric((processCPU()-client0).Seconds()*1e6/n, "client-µs/op")
			sends, calls := c.CoalesceStats()
			b.ReportMetric(float64(calls-calls0)/float64(max(sends-sends0, 1)), "calls/send")
		})
	}
}

func processCPU() time.Duration {
	d, _ := relock.ProcessCPU()
	return d
}

func sharedClientCycles(b *testing.B, c *relock.Client) {
	const workers = 64
	var next atomic.Int32
	b.SetParallelism((workers + 1) / 2) // × GOMAXPROCS goroutines: one per worker on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		l := c.Lock("shared" + strconv.Itoa(int(next.Add(1))))
		ctx := context.Background()
		for pb.Next() {
			held, err := l.Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(held); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
