package relock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// mutex is what every exclusive kind offers.
type mutex interface {
	Lock(context.Context) (context.Context, error)
	Unlock(context.Context) error
}

// cycleRun is what runCycle saw.
type cycleRun struct {
	errs      []error
	formed    time.Time     // when the last owner started waiting
	broken    time.Duration // from formed to the victim's return
	deadlocks []relock.DeadlockEvent
}

// runCycle runs len(locks) owners, each on a Client of its own, as
// processes would: owner i takes locks[i] and then, once every owner holds
// its first lock, waits for locks[(i+1)%n]. An owner that gets its second
// lock releases both; one that is refused releases its first.
func runCycle(t *testing.T, srv *redistest.Server, opt relock.Option, locks []func(*relock.Client) mutex) cycleRun {
	t.Helper()
	return runCycleOf(t, srv, opt, locks, append(locks[1:len(locks):len(locks)], locks[0]))
}

// runCycleOf is runCycle where owner i holds holds[i] and waits for
// waits[i].
func runCycleOf(t *testing.T, srv *redistest.Server, opt relock.Option, locks, waits []func(*relock.Client) mutex) cycleRun {
	t.Helper()
	n := len(locks)
	var mu sync.Mutex
	run := cycleRun{errs: make([]error, n)}
	var waiting atomic.Int32
	clients := make([]*relock.Client, n)
	for i := range clients {
		obs := &relock.Observer{
			WaitStarted: func(context.Context, relock.LockInfo) {
				if waiting.Add(1) == int32(n) {
					mu.Lock()
					run.formed = time.Now()
					mu.Unlock()
				}
			},
			Deadlock: func(_ context.Context, ev relock.DeadlockEvent) {
				mu.Lock()
				run.deadlocks = append(run.deadlocks, ev)
				mu.Unlock()
			},
		}
		clients[i] = relock.New(srv.Client(), opt, relock.WithObserver(obs), relock.WithName("proc-"+strconv.Itoa(i)))
		t.Cleanup(func() { _ = clients[i].Close() })
	}
	held := make([]context.Context, n)
	for i := range n {
		var err error
		held[i], err = locks[i](clients[i]).Lock(relock.NewOwner(context.Background()))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			first, second := locks[i](clients[i]), waits[i](clients[i])
			ctx, cancel := context.WithTimeout(held[i], 15*time.Second)
			defer cancel()
			h2, err := second.Lock(ctx)
			if err != nil {
				mu.Lock()
				run.errs[i], run.broken = err, time.Since(run.formed)
				mu.Unlock()
			} else {
				assert.NoError(t, second.Unlock(h2))
			}
			assert.NoError(t, first.Unlock(held[i]))
		})
	}
	wg.Wait()
	return run
}

// requireOneVictim checks that exactly one owner of run was told
// ErrDeadlock (with ErrNotObtained), within 2 s of the cycle forming, and
// that every other got its lock.
func requireOneVictim(t *testing.T, run cycleRun) {
	t.Helper()
	victims := 0
	for i, err := range run.errs {
		if err == nil {
			continue
		}
		require.ErrorIs(t, err, relock.ErrDeadlock, "owner %d", i)
		require.ErrorIs(t, err, relock.ErrNotObtained, "owner %d", i)
		victims++
	}
	require.Equal(t, 1, victims, "exactly one victim: %v", run.errs)
	require.Len(t, run.deadlocks, 1, "one Deadlock event")
	require.Len(t, run.deadlocks[0].Cycle, len(run.errs), "the event names every wait of the cycle")
	t.Logf("cycle of %d broken %v after it formed", len(run.errs), run.broken)
	assert.Less(t, run.broken, 2*time.Second+250*time.Millisecond, "broken within 2 s of forming (plus a margin for this machine)")
}

func TestDeadlockTwoOwnersTwoClientsLock(t *testing.T) {
	srv := redistest.Start(t)
	lock := func(name string) func(*relock.Client) mutex {
		return func(c *relock.Client) mutex { return c.Lock(name) }
	}
	run := runCycle(t, srv, relock.WithDeadlockDetection(time.Second), []func(*relock.Client) mutex{lock("dl-a"), lock("dl-b")})
	requireOneVictim(t, run)
	for _, err := range run.errs {
		if err != nil {
			assert.Contains(t, err.Error(), `"dl-a"`, "the error names the cycle's locks")
			assert.Contains(t, err.Error(), `"dl-b"`, "the error names the cycle's locks")
			assert.Contains(t, err.Error(), "(proc-0)", "the error names each owner's Client")
			assert.Contains(t, err.Error(), "(proc-1)", "the error names each owner's Client")
		}
	}
	var names []string
	for _, w := range run.deadlocks[0].Cycle {
		names = append(names, w.ClientName)
	}
	assert.ElementsMatch(t, []string{"proc-0", "proc-1"}, names, "the Deadlock event names each owner's Client")
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// The default detection is on, at 1 s: the options are left out.
func TestDeadlockThreeOwnersMixingKinds(t *testing.T) {
	srv := redistest.Start(t)
	locks := []func(*relock.Client) mutex{
		func(c *relock.Client) mutex { return c.Lock("dl-lock") },
		func(c *relock.Client) mutex { return c.FairLock("dl-fair") },
		func(c *relock.Client) mutex { return c.RWLock("dl-rw").WriteLock() },
	}
	run := runCycle(t, srv, relock.WithKeyPrefix("relock"), locks)
	requireOneVictim(t, run)
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// A waiter whose holder waits for nothing is never a victim: B holds the
// lock for 3 s, well past the detection delay, and A gets it then.
func TestDeadlockNoFalsePositiveWhenTheHolderDoesNotWait(t *testing.T) {
	srv := redistest.Start(t)
	var events atomic.Int32
	obs := relock.WithObserver(&relock.Observer{Deadlock: func(context.Context, relock.DeadlockEvent) { events.Add(1) }})
	a, b := relock.New(srv.Client(), obs), relock.New(srv.Client(), obs)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	hb, err := b.Lock("dl-x").Lock(context.Background())
	require.NoError(t, err)
	ha, err := a.Lock("dl-y").Lock(context.Background()) // A holds something too
	require.NoError(t, err)
	go func() {
		time.Sleep(3 * time.Second) // B works, waiting for nothing
		assert.NoError(t, b.Lock("dl-x").Unlock(hb))
	}()
	ctx, cancel := context.WithTimeout(ha, 10*time.Second)
	defer cancel()
	start := time.Now()
	h2, err := a.Lock("dl-x").Lock(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Second, "A waited for B")
	require.NoError(t, a.Lock("dl-x").Unlock(h2))
	require.NoError(t, a.Lock("dl-y").Unlock(ha))
	assert.Zero(t, events.Load(), "no deadlock reported")
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// A cycle of holds with short leases breaks by itself when a lease ends:
// detected only after the leases, it is never reported.
func TestDeadlockBrokenByALeaseEndIsNotReported(t *testing.T) {
	srv := redistest.Start(t)
	var events atomic.Int32
	opts := []relock.Option{
		relock.WithDeadlockDetection(2 * time.Second),
		relock.WithObserver(&relock.Observer{Deadlock: func(context.Context, relock.DeadlockEvent) { events.Add(1) }}),
	}
	a, b := relock.New(srv.Client(), opts...), relock.New(srv.Client(), opts...)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ha, err := a.Lock("dl-p").TryLock(relock.NewOwner(context.Background()), 0, 700*time.Millisecond)
	require.NoError(t, err)
	hb, err := b.Lock("dl-q").TryLock(relock.NewOwner(context.Background()), 0, 700*time.Millisecond)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for _, w := range []struct {
		c    *relock.Client
		h    context.Context
		name string
	}{{a, ha, "dl-q"}, {b, hb, "dl-p"}} {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(w.h), 10*time.Second)
			defer cancel()
			h2, err := w.c.Lock(w.name).Lock(ctx)
			if assert.NoError(t, err, "the lease ended the cycle") {
				assert.NoError(t, w.c.Lock(w.name).Unlock(h2))
			}
		})
	}
	wg.Wait()
	assert.Zero(t, events.Load(), "no deadlock reported")
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// A wait record left by an owner that does not hold what the chain leads
// to makes no cycle: A waits for x held by B; B's record (forged, with a
// live lease) says B waits for y, which A does not hold.
func TestDeadlockStaleRecordMakesNoCycle(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	var events atomic.Int32
	obs := relock.WithObserver(&relock.Observer{Deadlock: func(context.Context, relock.DeadlockEvent) { events.Add(1) }})
	a, b := relock.New(rdb, obs, relock.WithDeadlockDetection(100*time.Millisecond)), relock.New(rdb, obs)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	hb, err := b.Lock("dl-x").Lock(context.Background())
	require.NoError(t, err)
	bOwner := ownerField(t, b, hb)
	require.NoError(t, rdb.Set(context.Background(), "relock:{dl:"+bOwner+"}", "1\x00forged\x00lock\x00dl-y", 10*time.Second).Err())
	ha, err := a.Lock("dl-z").Lock(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ha, time.Second)
	defer cancel()
	_, err = a.Lock("dl-x").Lock(ctx)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	require.NotErrorIs(t, err, relock.ErrDeadlock)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "the wait ended with its context: %v", err)
	assert.Zero(t, events.Load())
	require.NoError(t, a.Lock("dl-z").Unlock(ha))
	require.NoError(t, b.Lock("dl-x").Unlock(hb))
}

// semMutex is a Semaphore's single permit as a mutex.
type semMutex struct{ s *relock.Semaphore }

func (m semMutex) Lock(ctx context.Context) (context.Context, error) { return m.s.Acquire(ctx, 1) }
func (m semMutex) Unlock(ctx context.Context) error                  { return m.s.Release(ctx) }

// A cycle through a Semaphore, an RWLock's readers and its writer: A holds
// the permit and waits for the Lock, B holds the Lock and waits for the
// write lock, C reads and waits for the permit.
func TestDeadlockThroughSemaphoreAndReaders(t *testing.T) {
	srv := redistest.Start(t)
	sem := func(c *relock.Client) mutex { return semMutex{c.Semaphore("dl-sem", 1)} }
	lock := func(c *relock.Client) mutex { return c.Lock("dl-l") }
	read := func(c *relock.Client) mutex { return c.RWLock("dl-rw").ReadLock() }
	write := func(c *relock.Client) mutex { return c.RWLock("dl-rw").WriteLock() }
	run := runCycleOf(t, srv, relock.WithDeadlockDetection(time.Second),
		[]func(*relock.Client) mutex{sem, lock, read},
		[]func(*relock.Client) mutex{lock, write, sem})
	requireOneVictim(t, run)
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// A reader waits for the writer: A writes and waits for the Lock, B holds
// the Lock and waits to read.
func TestDeadlockReaderWaitingForTheWriter(t *testing.T) {
	srv := redistest.Start(t)
	lock := func(c *relock.Client) mutex { return c.Lock("dl-l") }
	read := func(c *relock.Client) mutex { return c.RWLock("dl-rw").ReadLock() }
	write := func(c *relock.Client) mutex { return c.RWLock("dl-rw").WriteLock() }
	run := runCycleOf(t, srv, relock.WithDeadlockDetection(time.Second),
		[]func(*relock.Client) mutex{write, lock},
		[]func(*relock.Client) mutex{lock, read})
	requireOneVictim(t, run)
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// A Semaphore waiter is deadlocked only when every holder leads back: with
// a second permit held by an owner that waits for nothing, the waiter may
// still be served, and nothing is reported; the permit's release serves it.
func TestDeadlockSemaphoreWithAFreeHolderIsNoCycle(t *testing.T) {
	srv := redistest.Start(t)
	var events atomic.Int32
	obs := relock.WithObserver(&relock.Observer{Deadlock: func(context.Context, relock.DeadlockEvent) { events.Add(1) }})
	a, b, free := relock.New(srv.Client(), obs), relock.New(srv.Client(), obs), relock.New(srv.Client(), obs)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close(); _ = free.Close() })
	ha, err := a.Semaphore("dl-sem2", 2).Acquire(relock.NewOwner(context.Background()), 1)
	require.NoError(t, err)
	hf, err := free.Semaphore("dl-sem2", 2).Acquire(relock.NewOwner(context.Background()), 1)
	require.NoError(t, err)
	hb, err := b.Lock("dl-l2").Lock(relock.NewOwner(context.Background()))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() { // A waits for B's Lock; B waits for a permit
		ctx, cancel := context.WithTimeout(ha, 10*time.Second)
		defer cancel()
		h, err := a.Lock("dl-l2").Lock(ctx)
		if assert.NoError(t, err) {
			assert.NoError(t, a.Lock("dl-l2").Unlock(h))
		}
		assert.NoError(t, a.Semaphore("dl-sem2", 2).Release(ha))
	})
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(hb, 10*time.Second)
		defer cancel()
		h, err := b.Semaphore("dl-sem2", 2).Acquire(ctx, 1)
		if assert.NoError(t, err) {
			assert.NoError(t, b.Semaphore("dl-sem2", 2).Release(h))
		}
		assert.NoError(t, b.Lock("dl-l2").Unlock(hb))
	})
	time.Sleep(2500 * time.Millisecond) // past two checks of each waiter
	assert.Zero(t, events.Load(), "no deadlock while a holder may still release")
	require.NoError(t, free.Semaphore("dl-sem2", 2).Release(hf))
	wg.Wait()
	assert.Zero(t, events.Load())
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// The cost of detection: 100 waiters, not in a cycle, waiting past the
// delay for a holder that waits for nothing. Each check renews the waiter's
// record (SET), reads the holders of its lock (one script) and the holder's
// record (GET): three commands per waiter per half delay. Without
// detection, the same waiters send nothing while they sleep.
func TestDeadlockDetectionCostOf100Waiters(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for seconds")
	}
	for _, tc := range []struct {
		name  string
		after time.Duration
		max   float64 // client commands per second
	}{{"off", 0, 20}, {"1s", time.Second, 100 * 2 * 1.2}} {
		t.Run(tc.name, func(t *testing.T) {
			perSec := detectionCost(t, tc.after)
			t.Logf("100 waiters, detection %s: %.0f Redis commands/s", tc.name, perSec)
			assert.LessOrEqual(t, perSec, tc.max)
			if tc.after > 0 {
				// Each waiter renews its record every half delay; its
				// search (the lock's state, the holder's record) came at
				// the delay and comes again 8 delays later.
				assert.GreaterOrEqual(t, perSec, 100*2*0.7, "every waiter renews its record every half delay")
			}
		})
	}
}

// detectionCost returns the Redis commands per second that clients send
// while 100 waiters wait for a lock held by an owner that waits for
// nothing, measured over 3 s once they have all waited past after.
func detectionCost(t *testing.T, after time.Duration) float64 {
	srv := redistest.Start(t)
	rdb := srv.Client()
	holder := relock.New(rdb)
	t.Cleanup(func() { _ = holder.Close() })
	hctx, err := holder.Lock("dl-cost").Lock(context.Background())
	require.NoError(t, err)
	const waiters = 100
	var wg sync.WaitGroup
	clients := make([]*relock.Client, 4) // as four processes
	for i := range clients {
		clients[i] = relock.New(srv.Client(), relock.WithDeadlockDetection(after))
		t.Cleanup(func() { _ = clients[i].Close() })
	}
	for i := range waiters {
		c := clients[i%len(clients)]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(relock.NewOwner(context.Background()), 20*time.Second)
			defer cancel()
			h, err := c.Lock("dl-cost").Lock(ctx)
			if assert.NoError(t, err) {
				assert.NoError(t, c.Lock("dl-cost").Unlock(h))
			}
		})
	}
	time.Sleep(1500 * time.Millisecond) // every waiter past the delay
	count := func() int64 {
		m, err := redistest.CommandCalls(context.Background(), rdb)
		require.NoError(t, err)
		return m["evalsha"] + m["eval"] + m["set"] + m["get"] + m["del"] + m["ping"]
	}
	before, start := count(), time.Now()
	time.Sleep(3 * time.Second)
	n, d := count()-before, time.Since(start)
	require.NoError(t, holder.Lock("dl-cost").Unlock(hctx))
	wg.Wait()
	requireOnlyExpiringLeftovers(t, rdb)
	return float64(n) / d.Seconds()
}

// The multi-process run: 4 processes (internal/holderproc -kind deadlock)
// take 2 of 4 names in random orders, holding the first while they wait
// for the second, for 20 s (RELOCK_DEADLOCK_RUN: a duration to run for
// instead). Every deadlock is broken (no wait reaches its 10 s bound), each
// within the bound, no two holders of a name overlap, and nothing is left
// held.
func TestDeadlockProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes for 20 s")
	}
	runFor := 20 * time.Second
	if v := os.Getenv("RELOCK_DEADLOCK_RUN"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		runFor = d
	}
	bin := buildHolder(t)
	srv := redistest.Start(t)
	const procs = 4
	ps := make([]*reportingProc, procs)
	for i := range ps {
		ps[i] = startReportingProcess(t, bin, "-addr", srv.Addr(), "-kind", "deadlock",
			"-name", "dlp-0,dlp-1,dlp-2,dlp-3", "-for", runFor.String())
	}
	var total struct{ ops, deadlocks, timeouts, overlaps, errs int }
	var maxBreak int
	for i, p := range ps {
		line := p.report(t, i, runFor+30*time.Second)
		var ops, dls, mb, tos, ovs, errs int
		_, err := fmt.Sscanf(line, "result ops=%d deadlocks=%d maxbreak=%d timeouts=%d overlaps=%d errors=%d", &ops, &dls, &mb, &tos, &ovs, &errs)
		require.NoError(t, err, "process %d said %q", i, line)
		t.Logf("process %d: %s", i, strings.TrimSpace(line))
		total.ops += ops
		total.deadlocks += dls
		total.timeouts += tos
		total.overlaps += ovs
		total.errs += errs
		maxBreak = max(maxBreak, mb)
	}
	t.Logf("%v, %d processes: %d transfers, %d deadlocks broken, longest victim wait %d ms", runFor, procs, total.ops, total.deadlocks, maxBreak)
	assert.Positive(t, total.deadlocks, "the run deadlocks")
	assert.Zero(t, total.timeouts, "every deadlock broken: no wait reached its bound")
	assert.Zero(t, total.overlaps, "no two holders of a name at once")
	assert.Zero(t, total.errs)
	assert.LessOrEqual(t, maxBreak, 2500, "each deadlock broken within 2 s of forming (a margin for this machine)")
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// A wait publishes its record at half the detection delay and searches at
// the delay. Two waits of a cycle that begin within a few ms of each other
// (two processes taking two locks in opposite orders) would otherwise
// publish and search at the same instants: a check of the older one that
// a loaded machine runs a little late misses the youngest's search, and the
// cycle waits for the next one, 8 delays later. Published at half the
// delay, every older member's record is there half a delay before the
// youngest searches.
func TestDeadlockRecordPublishedAtHalfTheDelay(t *testing.T) {
	srv := redistest.Start(t)
	const after = time.Second
	c := relock.New(srv.Client(), relock.WithDeadlockDetection(after))
	t.Cleanup(func() { _ = c.Close() })
	holder := relock.New(srv.Client())
	t.Cleanup(func() { _ = holder.Close() })
	held, err := holder.Lock("dl-half").Lock(relock.NewOwner(context.Background()))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(relock.NewOwner(context.Background()), 5*time.Second)
	defer cancel()
	started := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := c.Lock("dl-half").Lock(ctx)
		done <- err
	}()
	records := func() int {
		keys, err := srv.Client().Keys(context.Background(), "relock:{dl:*").Result()
		require.NoError(t, err)
		return len(keys)
	}
	require.Eventually(t, func() bool { return records() == 1 }, 3*time.Second, time.Millisecond, "the wait published its record")
	published := time.Since(started)
	t.Logf("record published %v after the wait began", published)
	assert.Less(t, published, after*85/100, "at half the delay, well before the first search")
	cancel()
	require.ErrorIs(t, <-done, relock.ErrNotObtained)
	require.NoError(t, holder.Lock("dl-half").Unlock(held))
}
