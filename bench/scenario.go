package bench

import "time"

// A Scenario is one workload every library runs in turn.
type Scenario struct {
	ID    string // short, stable: used in tables and the chart
	Title string
	// Workers goroutines each loop Lock → critical section → Unlock.
	Workers int
	// OwnKeys gives every worker its own lock name; otherwise all share one.
	OwnKeys bool
	// Hold is how long a worker stays in the critical section.
	Hold time.Duration
	// PassOn makes a worker that released the lock wait until another worker
	// has taken it (or passOnTimeout) before it tries again, so that every
	// acquisition is a hand-off to a waiter. Without it, the releaser usually
	// takes the lock straight back, and a polling library's waiters are
	// never measured at all.
	PassOn bool
	// Depth > 1 re-enters the hold Depth-1 times before unlocking as often
	// (only libraries that implement Reentrant run such a scenario).
	Depth int
	// Only restricts the scenario to these libraries (empty: all). The
	// floor's result of Baseline is then the reference of its ratios.
	Only     []string
	Baseline string
}

// Scenario IDs.
const (
	Uncontended = "uncontended"
	ManyKeys    = "64keys"
	OneKey      = "onekey"
	Hold2ms     = "hold2ms"
	Reentrant3  = "reentrant3"
)

// Scenarios returns the scenarios, in the order they run.
func Scenarios() []Scenario {
	return []Scenario{
		{ID: Uncontended, Title: "1. uncontended Lock+Unlock, 1 goroutine", Workers: 1},
		{ID: ManyKeys, Title: "2. 64 goroutines on 64 keys", Workers: 64, OwnKeys: true},
		{
			// The 1 ms hold makes the previous releaser's first attempt fail,
			// so that it waits like everyone else: with no hold, the releaser
			// of one hold and the next holder would take turns, and the
			// waiters' wake-up would never be measured.
			ID: OneKey, Title: "3. 16 goroutines on one key, 1 ms hold, each release handed to a waiter",
			Workers: 16, Hold: time.Millisecond, PassOn: true,
		},
		{ID: Hold2ms, Title: "4. 8 goroutines on one key, 2 ms hold, free-for-all", Workers: 8, Hold: 2 * time.Millisecond},
		{
			ID: Reentrant3, Title: "5. relock: reentrant depth 3, 1 goroutine", Workers: 1, Depth: 3,
			Only: []string{"relock"}, Baseline: Uncontended,
		},
		// FairLock runs every scenario above as the library "relock-fair".
		// An RWLock scenario (readers + a writer) needs a reader/writer split
		// in Worker, which only knows exclusive holds: see rwlock_bench_test.go
		// in the library for RWLock against Lock.
	}
}

// IdealRate is the acquisitions per second of a perfect lock in the Hold
// scenario: back-to-back holds with zero hand-off time.
func (s Scenario) IdealRate() float64 {
	if s.Hold <= 0 {
		return 0
	}
	return float64(time.Second) / float64(s.Hold)
}

func (s Scenario) runs(lib string) bool {
	if len(s.Only) == 0 {
		return true
	}
	for _, n := range s.Only {
		if n == lib {
			return true
		}
	}
	return false
}
