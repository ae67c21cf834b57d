package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// stuckGrace is how long workers get to return after a run's end before the
// run is reported stuck (a library that ignores its context).
const stuckGrace = 10 * time.Second

// unlockTimeout bounds an Unlock, which runs detached from the run's end so
// that the last holds are released.
const unlockTimeout = 5 * time.Second

// guard checks mutual exclusion on one lock name. holders catches two
// holders at once; seq is read, yielded on and written back inside the
// critical section, so overlapping holders lose updates, which the final
// count shows even when their overlap was too short for holders to see.
type guard struct {
	holders atomic.Int32
	seq     atomic.Int64

	// taken is closed and replaced at every acquisition: workers of a PassOn
	// scenario wait on it for someone else to take the lock. back is the
	// number of holds whose holder is back in Lock, counted from the first
	// and without gaps as far as PassOn needs; rejoined is closed and
	// replaced when it grows.
	mu       sync.Mutex
	taken    chan struct{}
	back     int64
	rejoined chan struct{}
}

// passOnTimeout bounds a PassOn worker's wait for another worker to take
// the lock, so that a library whose waiters all sleep long still runs.
const passOnTimeout = time.Second

// acquired tells the workers waiting for the lock to change hands.
func (g *guard) acquired() {
	g.mu.Lock()
	if g.taken != nil {
		close(g.taken)
	}
	g.taken = make(chan struct{})
	g.mu.Unlock()
}

// awaitOther waits until the lock was taken by an acquisition after seq
// (seq being the caller's own), ctx ends or passOnTimeout passes.
func (g *guard) awaitOther(ctx context.Context, seq int64) {
	g.await(ctx, func() (bool, chan struct{}) { return g.seq.Load() > seq+1, g.taken })
}

// await waits until check, run with g.mu held, reports done, ctx ends or
// passOnTimeout passes; check's channel is closed when it may have changed.
func (g *guard) await(ctx context.Context, check func() (bool, chan struct{})) {
	timeout := time.NewTimer(passOnTimeout)
	defer timeout.Stop()
	for {
		g.mu.Lock()
		done, ch := check()
		g.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-timeout.C:
			return
		}
	}
}

// rejoin records that the holder of hold seq (0 the first) is about to
// call Lock again.
func (g *guard) rejoin(seq int64) {
	g.mu.Lock()
	if seq+1 > g.back {
		g.back = seq + 1
		if g.rejoined != nil {
			close(g.rejoined)
		}
		g.rejoined = make(chan struct{})
	}
	g.mu.Unlock()
}

// awaitRejoin waits until the holder of the hold before hold seq is back in
// Lock (see rejoin), ctx ends or passOnTimeout passes.
func (g *guard) awaitRejoin(ctx context.Context, seq int64) {
	g.await(ctx, func() (bool, chan struct{}) {
		if g.rejoined == nil {
			g.rejoined = make(chan struct{})
		}
		return g.back >= seq, g.rejoined
	})
}

// cycle is one worker's record of one acquisition.
type cycle struct {
	worker int
	seq    int64
	// Since the run's start: when Lock was called and returned, when Unlock
	// was called and returned.
	called, locked, releasing, unlocked time.Duration
}

// workRun is one run of a workload: its scenario, its keys' guards and what
// its workers report.
type workRun struct {
	sc      Scenario
	lockers []Locker
	guards  []guard
	res     *Result
	start   time.Time

	errs     atomic.Int64
	firstErr atomic.Pointer[string]
	viol     atomic.Int64

	mu        sync.Mutex
	abandoned bool // the run was reported stuck: late workers keep out
	cycles    [][]cycle
	latency   []time.Duration
	waits     []time.Duration
}

// workload runs sc for one library on its lockers until ctx ends.
func workload(ctx context.Context, sc Scenario, lockers []Locker) *Result {
	keys := 1
	if sc.OwnKeys {
		keys = sc.Workers
	}
	r := &workRun{sc: sc, lockers: lockers, guards: make([]guard, keys),
		res: &Result{Scenario: sc.ID, PerWorker: make([]int64, sc.Workers)}, start: time.Now()}
	var wg sync.WaitGroup
	for w := range sc.Workers {
		wg.Go(func() { r.worker(ctx, w) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	<-ctx.Done()
	select {
	case <-done:
	case <-time.After(stuckGrace):
		r.res.Stuck = true
	}
	r.res.Elapsed = time.Since(r.start)
	return r.finish()
}

func (r *workRun) fail(what string, err error) {
	r.errs.Add(1)
	s := fmt.Sprintf("%s: %v", what, err)
	r.firstErr.CompareAndSwap(nil, &s)
}

// worker is worker w: it takes and releases its key until ctx ends, then
// reports its cycles, unless the run was given up on as stuck.
func (r *workRun) worker(ctx context.Context, w int) {
	l := r.lockers[w%len(r.lockers)]
	g := &r.guards[0]
	name := "k"
	if r.sc.OwnKeys {
		g = &r.guards[w]
		name = "k" + strconv.Itoa(w)
	}
	var mine []cycle
	var lat, wait []time.Duration
	for ctx.Err() == nil {
		c, ok := r.cycle(ctx, w, l, g, name)
		if !ok {
			continue
		}
		mine = append(mine, c)
		wait = append(wait, c.locked-c.called)
		if r.sc.Workers == 1 {
			lat = append(lat, c.unlocked-c.called)
		}
		if r.sc.PassOn {
			g.awaitOther(ctx, c.seq)
			g.rejoin(c.seq)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abandoned {
		return
	}
	r.cycles = append(r.cycles, mine)
	r.latency = append(r.latency, lat...)
	r.waits = append(r.waits, wait...)
	r.res.PerWorker[w] = int64(len(mine))
}

// cycle is one acquisition of worker w: Lock, the hold (checked against
// the guard g), Unlock. ok is false when Lock failed.
func (r *workRun) cycle(ctx context.Context, w int, l Locker, g *guard, name string) (c cycle, ok bool) {
	t0 := time.Since(r.start)
	lctx := ctx
	if r.sc.Background {
		lctx = context.Background()
	}
	u, err := lock(lctx, l, name, r.sc.Depth)
	if err != nil {
		if ctx.Err() == nil {
			r.fail("lock", err)
			time.Sleep(time.Millisecond) // a failing Redis must not be spun on
		}
		return c, false
	}
	locked := time.Since(r.start)
	if g.holders.Add(1) != 1 {
		r.viol.Add(1)
	}
	seq := g.seq.Load()
	runtime.Gosched()
	g.seq.Store(seq + 1)
	if r.sc.PassOn {
		g.acquired()
		g.awaitRejoin(ctx, seq)
	}
	hold(r.sc)
	g.holders.Add(-1)
	releasing := time.Since(r.start)
	if err := unlock(u); err != nil {
		r.fail("unlock", err)
	}
	return cycle{w, seq, t0, locked, releasing, time.Since(r.start)}, true
}

// finish turns what the workers reported into the run's Result; a worker
// that reports later is left out.
func (r *workRun) finish() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.abandoned = true
	res := r.res
	for _, c := range r.cycles {
		res.Ops += int64(len(c))
	}
	res.Rates = []float64{res.totalRate()}
	var counted int64
	for i := range r.guards {
		counted += r.guards[i].seq.Load()
	}
	// Lost updates beyond those already seen as overlaps.
	res.Violations = max(r.viol.Load(), res.Ops-counted)
	res.Errors = r.errs.Load()
	if s := r.firstErr.Load(); s != nil {
		res.FirstError = *s
	}
	res.Latency = r.latency
	res.Wait = r.waits
	if !r.sc.OwnKeys && r.sc.Workers > 1 && res.Violations == 0 {
		res.Handoff, res.Reacquired, res.ToWaiter = handoffs(r.cycles)
	}
	return res
}

// hold spends sc.Hold inside the critical section, asleep.
func hold(sc Scenario) {
	switch {
	case sc.Hold <= 0:
	case sc.ShortHold:
		kernelSleep(sc.Hold)
	default:
		time.Sleep(sc.Hold)
	}
}

// lock takes the lock and re-enters it depth-1 times; the returned
// Unlockers release the holds innermost first.
func lock(ctx context.Context, l Locker, name string, depth int) ([]Unlocker, error) {
	u, err := l.Lock(ctx, name)
	if err != nil {
		return nil, err
	}
	holds := []Unlocker{u}
	for range depth - 1 {
		r, ok := l.(Reentrant)
		if !ok {
			_ = unlock(holds)
			return nil, fmt.Errorf("bench: %T is not reentrant", l)
		}
		if u, err = r.LockAgain(ctx, u); err != nil {
			_ = unlock(holds)
			return nil, err
		}
		holds = append(holds, u)
	}
	return holds, nil
}

func unlock(holds []Unlocker) error {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	var first error
	for i := len(holds) - 1; i >= 0; i-- {
		if err := holds[i].Unlock(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// handoffs puts the workers' cycles in hold order (the sequence numbers
// taken inside the critical section are that order when no violation
// occurred), measures each gap between an Unlock and the next Lock (see
// Result.Handoff), counts the holds that went to the worker that had just
// released, and those that went to a worker already waiting in Lock when
// the previous holder called Unlock.
func handoffs(perWorker [][]cycle) (gaps []time.Duration, reacquired, toWaiter int64) {
	var all []cycle
	for _, c := range perWorker {
		all = append(all, c...)
	}
	slices.SortFunc(all, func(a, b cycle) int { return int(a.seq - b.seq) })
	gaps = make([]time.Duration, 0, max(0, len(all)-1))
	for i := 1; i < len(all); i++ {
		prev, next := all[i-1], all[i]
		gaps = append(gaps, max(0, next.locked-prev.unlocked))
		if next.worker == prev.worker {
			reacquired++
		} else if next.called < prev.releasing {
			toWaiter++
		}
	}
	return gaps, reacquired, toWaiter
}
