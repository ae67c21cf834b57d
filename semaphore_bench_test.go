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

// BenchmarkSemaphoreAcquireRelease is Acquire(1) + Release on a real Redis
// against Lock + Unlock: one caller, and 64 goroutines (over 2 Clients) on
// a semaphore of 64 permits against 64 goroutines on 64 Locks of their own
// (neither waits). It reports acquisitions per second and the Redis
// commands per acquisition (INFO commandstats: every redis.call in the
// scripts).
func BenchmarkSemaphoreAcquireRelease(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run(fmt.Sprintf("semaphore/%d", g), func(b *testing.B) {
			benchCycles(b, g, func(c *relock.Client, _ int) cycle {
				s := c.Semaphore("bench", 64)
				return func(ctx context.Context) error {
					h, err := s.Acquire(ctx, 1)
					if err != nil {
						return err
					}
					return s.Release(h)
				}
			})
		})
		b.Run(fmt.Sprintf("lock/%d", g), func(b *testing.B) {
			benchCycles(b, g, func(c *relock.Client, i int) cycle {
				l := c.Lock(fmt.Sprintf("bench:%d", i))
				return func(ctx context.Context) error {
					h, err := l.Lock(ctx)
					if err != nil {
						return err
					}
					return l.Unlock(h)
				}
			})
		})
	}
}

type cycle func(context.Context) error

// benchCycles runs b.N cycles over goroutines goroutines, each made by mk
// on one of 2 Clients.
func benchCycles(b *testing.B, goroutines int, mk func(c *relock.Client, i int) cycle) {
	bk := newReal(b)
	clients := []*relock.Client{bk.newClient(b), relock.New(bk.newConn(b))}
	b.Cleanup(func() { _ = clients[1].Close() })
	ctx := context.Background()
	for i := range goroutines { // scripts loaded, subscriptions warm
		if err := mk(clients[i%2], i)(ctx); err != nil {
			b.Fatal(err)
		}
	}
	before, err := redistest.CommandCalls(ctx, bk.rdb)
	if err != nil {
		b.Fatal(err)
	}
	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := mk(clients[i%2], i)
			for remaining.Add(-1) >= 0 {
				if err := run(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	after, err := redistest.CommandCalls(ctx, bk.rdb)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(redistest.ClientCommands(before, after))/float64(b.N), "cmds/acq")
	b.ReportMetric(float64(allCommands(before, after))/float64(b.N), "redis-cmds/acq")
}

// allCommands is every command Redis ran between two CommandCalls
// snapshots, those the scripts ran inside it included (the INFO command
// that took the second snapshot is left out).
func allCommands(before, after map[string]int64) int64 {
	var n int64
	for name, calls := range after {
		n += calls - before[name]
	}
	return n - 1
}

// BenchmarkSemaphoreHandoff has 16 goroutines (over 2 Clients) take 1
// permit each of a semaphore of 4, in turn. Hand-off latency: from a
// Release returning to the Acquire it serves returning (releases serve
// waiters in order, one permit each). It also reports the commands per
// acquisition, waits included.
func BenchmarkSemaphoreHandoff(b *testing.B) {
	bk := newReal(b)
	clients := []*relock.Client{bk.newClient(b), relock.New(bk.newConn(b))}
	b.Cleanup(func() { _ = clients[1].Close() })
	ctx := context.Background()
	before, err := redistest.CommandCalls(ctx, bk.rdb)
	if err != nil {
		b.Fatal(err)
	}
	h := &handoffs{}
	h.remaining.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.run(b, clients[g%2].Semaphore("handoff", 4))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	after, err := redistest.CommandCalls(ctx, bk.rdb)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(redistest.ClientCommands(before, after))/float64(b.N), "cmds/acq")
	b.ReportMetric(float64(allCommands(before, after))/float64(b.N), "redis-cmds/acq")
	if d := h.took; len(d) > 0 {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds()), "handoff-p50-µs")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "handoff-p99-µs")
	}
}

// handoffs is BenchmarkSemaphoreHandoff's shared state.
type handoffs struct {
	remaining atomic.Int64
	used      atomic.Int32
	mu        sync.Mutex
	released  []time.Time // Release returns not yet matched by an Acquire
	took      []time.Duration
}

// run is one goroutine: acquire 1 permit of s, release it, until b.N.
func (h *handoffs) run(b *testing.B, s *relock.Semaphore) {
	ctx := context.Background()
	for h.remaining.Add(-1) >= 0 {
		hctx, err := s.Acquire(ctx, 1)
		if err != nil {
			b.Error(err)
			return
		}
		now := time.Now()
		if h.used.Add(1) > 4 {
			b.Error("more than 4 permits held")
		}
		h.mu.Lock()
		if len(h.released) > 0 {
			h.took = append(h.took, now.Sub(h.released[0]))
			h.released = h.released[1:]
		}
		h.mu.Unlock()
		h.used.Add(-1)
		if err := s.Release(hctx); err != nil {
			b.Error(err)
			return
		}
		h.mu.Lock()
		h.released = append(h.released, time.Now())
		h.mu.Unlock()
	}
}
