package relock_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/relock-go/relock"
)

// heapPerHeldLockBudget is the Go heap a held Lock may keep, in bytes: the
// Lock value the caller keeps to unlock it, its hold context and whatever
// the Client keeps for the hold (its record, its registry entry, its place
// in the lease heap). redislock keeps about 140 B; relock keeps more for
// what it promises (a context cancelled on loss, renewals, re-entry).
const heapPerHeldLockBudget = 1024

// TestHeapPerHeldLock holds many Locks at once with one Client on a real
// Redis (miniredis's own memory would count) and bounds the Go heap each
// keeps, measured after a GC. (The race detector's bookkeeping would count
// too: the test runs without it.)
func TestHeapPerHeldLock(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory distorts heap sizes")
	}
	for _, leased := range []bool{false, true} {
		t.Run(map[bool]string{false: "watchdog", true: "lease"}[leased], func(t *testing.T) {
			per := heapPerHeldLock(t, newReal(t), 5000, leased)
			t.Logf("Go heap per held Lock: %.0f B (budget %d)", per, heapPerHeldLockBudget)
			if per > heapPerHeldLockBudget {
				t.Fatalf("a held Lock keeps %.0f B of Go heap, more than the budget of %d B", per, heapPerHeldLockBudget)
			}
		})
	}
}

// BenchmarkHeapPerHeldLock reports the Go heap per held Lock (B/hold) with
// 10,000 Locks held on one Client.
func BenchmarkHeapPerHeldLock(b *testing.B) {
	bk := newReal(b)
	for b.Loop() {
		b.ReportMetric(heapPerHeldLock(b, bk, 10000, false), "B/hold")
	}
}

// heapPerHeldLock takes n Locks (each its own name, the watchdog's or with
// a lease) on a new Client of bk and returns the growth of the live Go heap
// per hold, then unlocks them.
func heapPerHeldLock(t testing.TB, bk *backend, n int, leased bool) float64 {
	c := bk.newClient(t)
	ctx := context.Background()
	take := func(l *relock.Lock) (context.Context, error) {
		if leased {
			return l.TryLock(ctx, 0, 10*time.Minute)
		}
		return l.Lock(ctx)
	}
	warm := c.Lock("heap-warm")
	for range 20 { // load the scripts, fill the pools
		held, err := take(warm)
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Unlock(held); err != nil {
			t.Fatal(err)
		}
	}
	locks := make([]*relock.Lock, n)
	holds := make([]context.Context, n)
	names := make([]string, n)
	for i := range names {
		names[i] = "heap-" + strconv.Itoa(i)
	}
	before := liveHeap()
	for i := range locks {
		locks[i] = c.Lock(names[i])
		held, err := take(locks[i])
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = held
	}
	after := liveHeap()
	for i, l := range locks {
		if err := l.Unlock(holds[i]); err != nil {
			t.Fatal(err)
		}
	}
	return float64(int64(after)-int64(before)) / float64(n)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
