package relock_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Ten locks on one Redis: one MultiLock (one script call to take them all,
// one to release them) against ten Locks taken and released one by one.
//
//	go test -run '^$' -bench 'BenchmarkMultiLock' -benchmem .
func BenchmarkMultiLock(b *testing.B) {
	srv := redistest.Start(b)
	c := relock.New(srv.Client())
	b.Cleanup(func() { _ = c.Close() })
	locks := make([]*relock.Lock, 10)
	for i := range locks {
		locks[i] = c.Lock("bench:" + strconv.Itoa(i))
	}
	ctx := context.Background()

	b.Run("multilock-10", func(b *testing.B) {
		m := relock.NewMultiLock(locks...)
		for b.Loop() {
			hctx, err := m.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(hctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sequential-10", func(b *testing.B) {
		for b.Loop() {
			hctx := ctx
			var err error
			for _, l := range locks {
				if hctx, err = l.Lock(hctx); err != nil {
					b.Fatal(err)
				}
			}
			for i := len(locks) - 1; i >= 0; i-- {
				if err := locks[i].Unlock(hctx); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
