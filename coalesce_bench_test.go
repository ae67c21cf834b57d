package relock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

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
// inline.go).
func BenchmarkSharedClient(b *testing.B) {
	srv := redistest.Start(b)
	for _, mode := range []string{"detached", "inline"} {
		b.Run(mode, func(b *testing.B) {
			rdb := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = mode == "inline" })
			c := relock.New(rdb)
			b.Cleanup(func() { _ = c.Close() })
			sharedClientCycles(b, c)
		})
	}
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
