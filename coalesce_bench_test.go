package relock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkSharedClient is the comparison benchmark's scenario 6 in the
// root module: 64 goroutines, each on its own lock, share one Client on a
// real Redis, so that their script calls are coalesced. ns/op and allocs/op
// are per Lock+Unlock cycle, all goroutines together.
func BenchmarkSharedClient(b *testing.B) {
	const workers = 64
	bk := newReal(b)
	c := bk.newClient(b)
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
