package relock_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Lock+Unlock latency of a RedLock over 3 and 5 local masters against a Lock
// on one of them. The masters are asked in parallel, so a round costs about
// the slowest master's round trip plus the goroutines' overhead.
//
//	go test -run '^$' -bench 'BenchmarkRedLock' -benchmem .
func BenchmarkRedLock(b *testing.B) {
	srvs := make([]*redistest.Server, 5)
	clients := make([]*relock.Client, 5)
	for i := range srvs {
		srvs[i] = redistest.Start(b)
		clients[i] = relock.New(srvs[i].Client())
		c := clients[i]
		b.Cleanup(func() { _ = c.Close() })
	}
	ctx := context.Background()

	b.Run("lock-1-node", func(b *testing.B) {
		l := clients[0].Lock("bench")
		for b.Loop() {
			hctx, err := l.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(hctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{3, 5} {
		b.Run("redlock-"+strconv.Itoa(n)+"-nodes", func(b *testing.B) {
			r := relock.NewRedLock("bench", clients[:n])
			for b.Loop() {
				hctx, err := r.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.Unlock(hctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
