package relock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// BenchmarkLockUnlock is one uncontended Lock + Unlock (two round trips),
// against the floor of what any Redis lock must do: SET NX PX to acquire and
// a compare-and-delete script to release, also two round trips. Compare the
// two on the same server: relock/redis vs floor/redis.
func BenchmarkLockUnlock(b *testing.B) {
	for _, be := range []struct {
		name string
		new  func(testing.TB) *backend
	}{{"miniredis", newMini}, {"redis", newReal}} {
		b.Run("relock/"+be.name, func(b *testing.B) {
			bk := be.new(b)
			c := bk.newClient(b)
			l := c.Lock("bench")
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				held, err := l.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(held); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The same with a deadline on the context, as in a request path:
		// each Redis call then runs bounded by it (bounded.go).
		b.Run("relock+deadline/"+be.name, func(b *testing.B) {
			bk := be.new(b)
			c := bk.newClient(b)
			l := c.Lock("bench")
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				held, err := l.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(held); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("floor/"+be.name, func(b *testing.B) {
			bk := be.new(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := relock.FloorCycle(ctx, bk.rdb, "floor"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReentrantLock is a re-entry and its Unlock under an outer hold.
func BenchmarkReentrantLock(b *testing.B) {
	bk := newReal(b)
	c := bk.newClient(b)
	l := c.Lock("bench")
	outer, err := l.Lock(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		inner, err := l.Lock(outer)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(inner); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContended has 16 goroutines (over 2 Clients, two "processes")
// take one lock in turn on a real Redis. It reports acquisitions per second,
// the hand-off latency — from one holder's Unlock returning to the next
// holder's Lock returning — at p50 and p99, and the Redis commands per
// acquisition from INFO commandstats.
func BenchmarkContended(b *testing.B) {
	bk := newReal(b)
	clients := []*relock.Client{bk.newClient(b), relock.New(bk.newConn(b))}
	b.Cleanup(func() { _ = clients[1].Close() })
	const goroutines = 16
	ctx := context.Background()
	before, err := redistest.CommandCalls(ctx, bk.rdb)
	if err != nil {
		b.Fatal(err)
	}

	var (
		remaining  atomic.Int64
		inside     atomic.Int32
		releasedAt atomic.Int64 // UnixNano when the last Unlock returned
		mu         sync.Mutex
		handoffs   []time.Duration
		wg         sync.WaitGroup
	)
	remaining.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := clients[g%2].Lock("contended")
			var mine []time.Duration
			for remaining.Add(-1) >= 0 {
				held, err := l.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if prev := releasedAt.Load(); prev != 0 {
					mine = append(mine, time.Duration(time.Now().UnixNano()-prev))
				}
				if inside.Add(1) != 1 {
					b.Error("mutual exclusion violated")
				}
				inside.Add(-1)
				releasedAt.Store(0)
				if err := l.Unlock(held); err != nil {
					b.Error(err)
					return
				}
				releasedAt.CompareAndSwap(0, time.Now().UnixNano())
			}
			mu.Lock()
			handoffs = append(handoffs, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	after, err := redistest.CommandCalls(ctx, bk.rdb)
	if err != nil {
		b.Fatal(err)
	}
	commands := redistest.ClientCommands(before, after)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(commands)/float64(b.N), "cmds/acq")
	if len(handoffs) > 0 {
		slices.Sort(handoffs)
		b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "handoff-p50-µs")
		b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "handoff-p99-µs")
	}
}

// BenchmarkWatchdogTick holds 10,000 locks on one Client against a real
// Redis and measures one renewal tick: its duration and its round trips.
func BenchmarkWatchdogTick(b *testing.B) {
	bk := newReal(b)
	c := bk.newClient(b)
	ctx := context.Background()
	const held = 10_000
	for i := range held {
		if _, err := c.Lock(fmt.Sprintf("held:%d", i)).Lock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if c.WatchedHolds() != held {
		b.Fatalf("watchdog renews %d holds, want %d", c.WatchedHolds(), held)
	}
	_, rt0, _ := c.WatchdogStats()
	ticks0, _, _ := c.WatchdogStats()
	b.ResetTimer()
	for b.Loop() {
		c.WatchdogTick()
	}
	b.StopTimer()
	ticks, rt, _ := c.WatchdogStats()
	n := float64(ticks - ticks0)
	b.ReportMetric(float64(rt-rt0)/n, "roundtrips/tick")
	b.ReportMetric(float64(held)/(float64(rt-rt0)/n), "locks/roundtrip")
}
