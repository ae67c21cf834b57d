package relock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
)

// cheapObserver sets every hook to a func that only counts: what an Observer
// costs the library itself, apart from what its hooks do.
func cheapObserver(n *atomic.Int64) *relock.Observer {
	return &relock.Observer{
		Acquired:              func(context.Context, relock.AcquiredEvent) { n.Add(1) },
		Released:              func(context.Context, relock.ReleasedEvent) { n.Add(1) },
		Renewed:               func(relock.RenewedEvent) { n.Add(1) },
		Lost:                  func(relock.LostEvent) { n.Add(1) },
		WaitStarted:           func(context.Context, relock.LockInfo) { n.Add(1) },
		Woken:                 func(context.Context, relock.LockInfo) { n.Add(1) },
		WaitEnded:             func(context.Context, relock.WaitEvent) { n.Add(1) },
		SubscriberReconnected: func(relock.SubscriberEvent) { n.Add(1) },
	}
}

var observerBackends = []struct {
	name string
	new  func(testing.TB) *backend
}{{"miniredis", newMini}, {"redis", newReal}}

// BenchmarkObserver is an uncontended Lock + Unlock with no Observer
// (unset) and with every hook set to a cheap func (set), on miniredis and on
// a real redis-server. Compare unset with set of one backend:
//
//	go test -run '^$' -bench Observer -benchmem -count 6 .
//
// Each sub-benchmark runs its count in a row, so a machine that slows down
// in between skews the pair; BenchmarkObserverPaired interleaves them.
func BenchmarkObserver(b *testing.B) {
	for _, be := range observerBackends {
		for _, set := range []bool{false, true} {
			name := be.name + "/unset"
			if set {
				name = be.name + "/set"
			}
			b.Run(name, func(b *testing.B) {
				bk := be.new(b)
				var n atomic.Int64
				var opts []relock.Option
				if set {
					opts = append(opts, relock.WithObserver(cheapObserver(&n)))
				}
				l := bk.newClient(b, opts...).Lock("bench")
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					held, err := l.Lock(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Unlock(held); err != nil {
						b.Fatal(err)
					}
				}
				if set && n.Load() < 2*int64(b.N) {
					b.Fatalf("%d events for %d Lock+Unlock", n.Load(), b.N)
				}
			})
		}
	}
}

// BenchmarkObserverPaired runs the same pair, unset and set, interleaved in
// blocks of 10 Lock+Unlock on one server, and reports for each the wall time
// and the CPU time of the test process (client, and miniredis when it is
// the server) per Lock+Unlock, and the overhead of set over unset in
// percent of both. Slow phases of a shared machine hit both alike, and CPU
// time does not count the time other processes take the CPU. A run still
// varies by several percent either way (an unset/unset pair does too); take
// the median of many:
//
//	go test -run '^$' -bench ObserverPaired -count 20 .
func BenchmarkObserverPaired(b *testing.B) {
	const block = 10
	for _, be := range observerBackends {
		b.Run(be.name, func(b *testing.B) {
			bk := be.new(b)
			var n atomic.Int64
			locks := [2]*relock.Lock{
				bk.newClient(b).Lock("bench-unset"),
				bk.newClient(b, relock.WithObserver(cheapObserver(&n))).Lock("bench-set"),
			}
			ctx := context.Background()
			var wall, cpu [2]time.Duration
			var count [2]int
			cpuOK := true
			side := 0
			var blockStart time.Time
			var blockCPU time.Duration
			endBlock := func() {
				wall[side] += time.Since(blockStart)
				c, ok := relock.ProcessCPU()
				cpu[side] += c - blockCPU
				cpuOK = cpuOK && ok
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%block == 0 {
					if i > 0 {
						endBlock()
					}
					// Blocks alternate unset/set, and which of the two goes
					// first in a pair of blocks alternates too.
					side = (i / block) % 2
					if (i/(2*block))%2 == 1 {
						side = 1 - side
					}
					blockCPU, _ = relock.ProcessCPU()
					blockStart = time.Now()
				}
				held, err := locks[side].Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := locks[side].Unlock(held); err != nil {
					b.Fatal(err)
				}
				count[side]++
				i++
			}
			endBlock()
			if count[0] == 0 || count[1] == 0 {
				return
			}
			per := func(d time.Duration, k int) float64 { return float64(d.Nanoseconds()) / float64(k) }
			u, s := per(wall[0], count[0]), per(wall[1], count[1])
			b.ReportMetric(u, "unset-ns/op")
			b.ReportMetric(s, "set-ns/op")
			b.ReportMetric(100*(s-u)/u, "overhead-%")
			if cpuOK {
				cu, cs := per(cpu[0], count[0]), per(cpu[1], count[1])
				b.ReportMetric(cu, "unset-cpu-ns/op")
				b.ReportMetric(cs, "set-cpu-ns/op")
				b.ReportMetric(100*(cs-cu)/cu, "cpu-overhead-%")
			}
		})
	}
}
