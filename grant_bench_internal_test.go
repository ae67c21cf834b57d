package relock

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// BenchmarkGrantEnd is the Client's own work for one hold, with no Redis
// call: recording a grant (the hold context, its lease end, the watchdog's
// mark) and ending it, as an uncontended Lock+Unlock does. parallel runs it
// on distinct records from every P, against the registry lock.
func BenchmarkGrantEnd(b *testing.B) {
	m := miniredis.RunT(b)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	c := New(rdb)
	b.Cleanup(func() { _ = c.Close() })
	cycle := func(h *hold) {
		if c.grant(h, context.Background(), context.Background(), partGrant{gen: "gen", token: 1}, 0, time.Now()) == nil {
			b.Fatal("not granted")
		}
		c.end(h, "gen", ErrUnlocked)
	}
	b.Run("serial", func(b *testing.B) {
		h := c.holds.enter(lockScheme{c.Lock("grant")}, "owner")
		b.ReportAllocs()
		for b.Loop() {
			cycle(h)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			h := c.holds.enter(lockScheme{c.Lock("grant")}, c.newOp())
			for pb.Next() {
				cycle(h)
			}
		})
	})
}
