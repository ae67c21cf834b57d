package relock_test

import (
	"context"
	"testing"
)

// lockUnlockAllocBudget is how many allocations an uncontended Lock+Unlock
// may make on a real Redis (client side, go-redis included). It was 58
// before each script call's EVALSHA command line was built once with the
// lock's keys boxed once (scripts.go newCall, keySet), NOSCRIPT checks
// stopped allocating, and requests stopped detaching contexts with nothing
// to detach, single-part calls kept their parts in the call, and a Lock
// that may wait stopped making a closure for a stray grant; it is 40
// now. The budget leaves room for the odd allocation
// of background goroutines (the subscriber, the watchdog) during the run.
const lockUnlockAllocBudget = 44

// TestLockUnlockAllocBudget keeps the per-cycle cost from creeping back:
// every allocation is paid by every Lock+Unlock of every user.
func TestLockUnlockAllocBudget(t *testing.T) {
	bk := newReal(t)
	c := bk.newClient(t)
	l := c.Lock("allocs")
	ctx := context.Background()
	cycle := func() {
		held, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(held); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 { // warm the pools, load the scripts
		cycle()
	}
	got := testing.AllocsPerRun(500, cycle)
	budget := float64(lockUnlockAllocBudget)
	if raceEnabled {
		budget += 4 // see race_on_test.go
	}
	t.Logf("Lock+Unlock: %.1f allocs (budget %.0f)", got, budget)
	if got > budget {
		t.Fatalf("Lock+Unlock made %.1f allocations, more than the budget of %.0f", got, budget)
	}
}
