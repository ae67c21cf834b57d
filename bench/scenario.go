package bench

import "time"

// A Scenario is one workload every library runs in turn.
type Scenario struct {
	ID    string // short, stable: used in tables, the chart and -scenarios
	Title string
	// Workers goroutines each loop Lock → critical section → Unlock.
	Workers int
	// Processes is the number of Lockers the workers use, worker w the
	// (w mod Processes)-th. A Locker is what one process of the user's would
	// have: its own go-redis (or rueidis) client, its own connections, its
	// own relock.Client with its own subscriber and watchdog. Processes ==
	// Workers gives every worker a process of its own, as when every worker
	// is a separate program; fewer makes goroutines share a Client, as
	// goroutines of one program do. 0 means Config.Clients (the shared-
	// Client rows, whose count the -clients flag sets).
	Processes int
	// OwnKeys gives every worker its own lock name; otherwise all share one.
	OwnKeys bool
	// Hold is how long a worker stays in the critical section (0: a few
	// atomic operations and a yield, the mutual-exclusion check).
	Hold time.Duration
	// ShortHold spends Hold in a kernel sleep (see kernelSleep): time.Sleep
	// cannot sleep less than about a millisecond on Linux.
	ShortHold bool
	// PassOn makes a worker that released the lock wait until another worker
	// has taken it (or passOnTimeout) before it tries again, and the new
	// holder wait until that worker is back in Lock before it starts its
	// Hold, so that every acquisition is a hand-off to a waiter. Without it,
	// the releaser usually takes the lock straight back, and a polling
	// library's waiters are never measured at all.
	PassOn bool
	// Depth > 1 re-enters the hold Depth-1 times before unlocking as often
	// (only libraries that implement Reentrant run such a scenario).
	Depth int
	// Only restricts the scenario to these libraries (empty: all). The
	// floor's result of Baseline is then the reference of its ratios.
	Only     []string
	Baseline string
	// Headline marks the scenarios that model what users run (one process
	// per worker, or one worker); the others are kept for comparison with
	// earlier reports.
	Headline bool
	// Background makes the workers pass context.Background() to Lock.
	// Otherwise they pass the run's context, which has a deadline (the end
	// of the run) and can be cancelled, as a service passes its request's.
	// Only for scenarios whose Lock never waits: a waiter would not stop
	// at the end of the run.
	Background bool
}

// Scenario IDs.
const (
	Uncontended = "uncontended"
	Procs16     = "p16"
	Procs64     = "p64"
	Procs8Hold  = "p8hold2ms"
	Procs64Keys = "p64keys"
	ManyKeys    = "64keys"
	OneKey      = "onekey"
	Hold2ms     = "hold2ms"
	Reentrant3  = "reentrant3"

	// The same with context.Background() (Scenario.Background).
	UncontendedBackground = "uncontended-bg"
	Procs64KeysBackground = "p64keys-bg"
	ManyKeysBackground    = "64keys-bg"
)

// backgroundLibraries run the context.Background() scenarios: relock's
// targets are against the seed lock (rueidislock's Lock, given a context
// that never ends, was seen not to return in one of them).
var backgroundLibraries = []string{FloorName, SeedName, relockName, relockDefaultName}

// tinyHold is the critical section of the many-process scenarios, about one
// loopback round trip long: a short call to some other service, say.
const tinyHold = 100 * time.Microsecond

// Scenarios returns the scenarios, in the order they run.
//
// The many-process scenarios on one key (16 and 64 processes) measure the
// hand-off: how long the lock stays idle between a release and the next
// waiter's hold, and what the waiters' wake-ups, retries and polls cost in
// commands. That needs every acquisition to go to a process that was
// waiting in Lock, which two choices ensure:
//
//   - PassOn: a process that released waits (outside the lock) until another
//     took it before it calls Lock again. In a free-for-all with a tiny
//     critical section, the releaser is one round trip from the free lock
//     while its waiters are a wake-up or a poll and a round trip away, so it
//     takes the lock straight back nearly every time: acquisitions/s would be
//     one process re-locking next to an idle audience, close to the
//     uncontended cycle whatever the wake-up mechanism, and the N−1 waiters
//     would hardly be measured.
//   - A critical section of tinyHold, started once the previous holder is
//     back in Lock (PassOn): with no hold at all, that process, back the
//     moment the next one got the lock, would reach the free lock as early
//     as the waiters, and the last two holders would take turns. 100 µs
//     from its Lock call lets its first attempt fail, so that it waits like
//     everyone else; without the wait for it, a process descheduled for
//     more than the hold on the loaded machine still took turns that way
//     (10-18% of the acquisitions, in the "handed to a waiter" row). It is
//     slept in the kernel, since time.Sleep cannot sleep less than about
//     1 ms on Linux, and not spun: a spinning holder competes for the 2
//     cores with the pollers' threads and, descheduled, stretches its hold
//     by whole time slices (seen: the floor's rate dropping tenfold in some
//     rounds).
//
// Acquisitions/s is then 1 ÷ (hold + hand-off + the holder's Unlock round
// trip), and the commands per acquisition include the work of all N−1
// waiters: a lock that wakes every waiter on each release shows it there,
// growing with N. The free-for-all, where barging and fairness are measured,
// is the 2 ms hold scenario.
func Scenarios() []Scenario {
	return []Scenario{
		{
			ID: Uncontended, Title: "1. uncontended Lock+Unlock, 1 process",
			Workers: 1, Processes: 1, Headline: true,
		},
		{
			ID: Procs16, Title: "2. 16 processes on one key, 100 µs critical section, each release handed to a waiter",
			Workers: 16, Processes: 16, Hold: tinyHold, ShortHold: true, PassOn: true, Headline: true,
		},
		{
			ID: Procs64, Title: "3. 64 processes on one key, 100 µs critical section, each release handed to a waiter",
			Workers: 64, Processes: 64, Hold: tinyHold, ShortHold: true, PassOn: true, Headline: true,
		},
		{
			// Saturated: the lock is held ~100% of the time, every process
			// calls Lock again as soon as it released, so barging and
			// fairness show. The mean wait in Lock is then N−1 holds or more
			// for any lock that serves the processes alike (Little's law:
			// 14 ms or more here, whatever the lock), so Lock p99 is reported
			// as the workload's figure; hand-off p99 is what the lock itself
			// adds to each hold.
			ID: Procs8Hold, Title: "4. 8 processes on one key, 2 ms hold, free-for-all",
			Workers: 8, Processes: 8, Hold: 2 * time.Millisecond, Headline: true,
		},
		{
			ID: Procs64Keys, Title: "5. 64 processes on 64 keys",
			Workers: 64, Processes: 64, OwnKeys: true, Headline: true,
		},
		// The earlier scenarios: goroutines sharing Config.Clients Clients.
		{ID: ManyKeys, Title: "6. 64 goroutines on 64 keys, shared Clients", Workers: 64, OwnKeys: true},
		{
			// The 1 ms hold makes the previous releaser's first attempt fail,
			// so that it waits like everyone else: with no hold, the releaser
			// of one hold and the next holder would take turns, and the
			// waiters' wake-up would never be measured.
			ID: OneKey, Title: "7. 16 goroutines on one key, 1 ms hold, each release handed to a waiter, shared Clients",
			Workers: 16, Hold: time.Millisecond, PassOn: true,
		},
		{ID: Hold2ms, Title: "8. 8 goroutines on one key, 2 ms hold, free-for-all, shared Clients", Workers: 8, Hold: 2 * time.Millisecond},
		{
			ID: Reentrant3, Title: "9. reentrant depth 3, 1 process (relock and the seed lock)", Workers: 1, Processes: 1, Depth: 3,
			Only: []string{"relock", SeedName}, Baseline: Uncontended,
		},
		// Lock's context without a deadline or a cancellation, beside the
		// scenarios above, whose Lock gets the run's context.
		{
			ID: UncontendedBackground, Title: "1b. uncontended Lock+Unlock, 1 process, context.Background()",
			Workers: 1, Processes: 1, Background: true, Only: backgroundLibraries,
		},
		{
			ID: Procs64KeysBackground, Title: "5b. 64 processes on 64 keys, context.Background()",
			Workers: 64, Processes: 64, OwnKeys: true, Background: true, Only: backgroundLibraries,
		},
		{ID: ManyKeysBackground, Title: "6b. 64 goroutines on 64 keys, shared Clients, context.Background()", Workers: 64, OwnKeys: true, Background: true, Only: backgroundLibraries},
		// FairLock runs every scenario above as the library "relock-fair".
		// An RWLock scenario (readers + a writer) needs a reader/writer split
		// in Worker, which only knows exclusive holds: see rwlock_bench_test.go
		// in the library for RWLock against Lock.
	}
}

// processes is the number of Lockers sc runs on, given the Config's default
// for shared-Client scenarios.
func (s Scenario) processes(clients int) int {
	n := s.Processes
	if n <= 0 {
		n = clients
	}
	return max(1, min(n, s.Workers))
}

// perProcess reports whether every worker of sc has a Locker of its own.
func (s Scenario) perProcess(clients int) bool { return s.processes(clients) == s.Workers }

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
