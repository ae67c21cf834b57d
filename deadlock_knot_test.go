package relock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// An owner of a deadlock test: its Client, what it holds first, what it
// then waits for.
type knotOwner struct {
	name        string
	holds, wait func(*relock.Client) mutex
}

// knotRun is what runKnot saw: each owner's error, when its wait returned
// and when the last wait began.
type knotRun struct {
	errs     map[string]error
	returned map[string]time.Time
	formed   time.Time
	events   []relock.DeadlockEvent
}

// runKnot runs owners, each on a Client of its own with detection after
// after, as processes would: every owner takes what it holds, then they
// start waiting one at a time in the order given, each once the one before
// has begun (its WaitStarted), so the last one's wait is the youngest. An
// owner that gets what it waits for releases both; one refused releases
// what it holds.
func runKnot(t *testing.T, after time.Duration, owners []knotOwner) knotRun {
	t.Helper()
	srv := redistest.Start(t)
	run := knotRun{errs: map[string]error{}, returned: map[string]time.Time{}}
	var mu sync.Mutex
	started := make([]chan struct{}, len(owners))
	clients := make([]*relock.Client, len(owners))
	held := make([]context.Context, len(owners))
	for i, o := range owners {
		started[i] = make(chan struct{})
		var once sync.Once
		obs := &relock.Observer{
			WaitStarted: func(context.Context, relock.LockInfo) { once.Do(func() { close(started[i]) }) },
			Deadlock: func(_ context.Context, ev relock.DeadlockEvent) {
				mu.Lock()
				run.events = append(run.events, ev)
				mu.Unlock()
			},
		}
		clients[i] = relock.New(srv.Client(), relock.WithDeadlockDetection(after), relock.WithObserver(obs))
		t.Cleanup(func() { _ = clients[i].Close() })
		var err error
		held[i], err = o.holds(clients[i]).Lock(relock.NewOwner(context.Background()))
		require.NoError(t, err, o.name)
	}
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(held[i], 8*time.Second)
			defer cancel()
			h, err := o.wait(clients[i]).Lock(ctx)
			mu.Lock()
			run.errs[o.name], run.returned[o.name] = err, time.Now()
			mu.Unlock()
			if err == nil {
				assert.NoError(t, o.wait(clients[i]).Unlock(h))
			}
			assert.NoError(t, o.holds(clients[i]).Unlock(held[i]))
		})
		<-started[i]
		// Records start on a millisecond clock: the next wait begins in a
		// later millisecond, so that it is the younger without a tie.
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	run.formed = time.Now()
	mu.Unlock()
	wg.Wait()
	requireOnlyExpiringLeftovers(t, srv.Client())
	return run
}

// requireVictim checks that exactly victim was told ErrDeadlock (with
// ErrNotObtained), within after + after/2 of the deadlock forming (plus a
// margin for this machine), that every other owner got what it waited for,
// and that one Deadlock event named all n owners.
func requireVictim(t *testing.T, run knotRun, victim string, after time.Duration, n int) {
	t.Helper()
	for name, err := range run.errs {
		if name != victim {
			assert.NoError(t, err, "owner %s proceeds once the victim gives up", name)
		}
	}
	err := run.errs[victim]
	require.ErrorIs(t, err, relock.ErrDeadlock, "the youngest wait, %s, gives up", victim)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	broken := run.returned[victim].Sub(run.formed)
	t.Logf("broken %v after the last wait began (after %v)", broken, after)
	assert.Less(t, broken, after+after/2+250*time.Millisecond, "within after + after/2")
	require.Len(t, run.events, 1, "one Deadlock event")
	assert.Len(t, run.events[0].Cycle, n, "the event names every member")
}

// A Semaphore of 2 permits held by H1 and H2; W holds a
// Lock and waits for a permit; H1 and H2 wait for the Lock. Every holder of
// W's Semaphore waits for W: a deadlock of three, which its youngest wait
// breaks, whichever it is, within after + after/2.
func TestDeadlockThroughEveryHolderOfASemaphore(t *testing.T) {
	const after = 500 * time.Millisecond
	sem := func(c *relock.Client) mutex { return semMutex{c.Semaphore("dlk-sem", 2)} }
	lock := func(c *relock.Client) mutex { return c.Lock("dlk-l") }
	w := knotOwner{"W", lock, sem}
	h1, h2 := knotOwner{"H1", sem, lock}, knotOwner{"H2", sem, lock}
	for _, order := range [][]knotOwner{{w, h1, h2}, {w, h2, h1}, {h1, h2, w}} {
		youngest := order[2].name
		t.Run(youngest+" youngest", func(t *testing.T) {
			run := runKnot(t, after, order)
			requireVictim(t, run, youngest, after, 3)
		})
	}
}

// A Semaphore one of whose holders waits in a cycle of its own: W holds
// Lock L and waits for a permit of the Semaphore held by H1 and H2; H1
// waits for L; H2 also holds Lock M and waits for Lock N, which X holds
// while it waits for M. Breaking H2 and X's cycle frees W, so its youngest
// wait alone gives up, even when W's or H1's wait is younger still.
func TestDeadlockSemaphoreBehindAnotherCycle(t *testing.T) {
	const after = 500 * time.Millisecond
	sem := func(c *relock.Client) *relock.Semaphore { return c.Semaphore("dlk-sem", 2) }
	permitAndM := func(c *relock.Client) mutex {
		return mutexFunc{
			lock: func(ctx context.Context) (context.Context, error) {
				h, err := sem(c).Acquire(ctx, 1)
				if err != nil {
					return nil, err
				}
				return c.Lock("dlk-m").Lock(h)
			},
			unlock: func(ctx context.Context) error {
				return errors.Join(c.Lock("dlk-m").Unlock(ctx), sem(c).Release(ctx))
			},
		}
	}
	permit := func(c *relock.Client) mutex { return semMutex{sem(c)} }
	w := knotOwner{"W", lockNamed("dlk-l"), permit}
	h1 := knotOwner{"H1", permit, lockNamed("dlk-l")}
	h2 := knotOwner{"H2", permitAndM, lockNamed("dlk-n")}
	x := knotOwner{"X", lockNamed("dlk-n"), lockNamed("dlk-m")}
	for _, order := range [][]knotOwner{{w, h1, x, h2}, {x, h2, w, h1}} {
		t.Run(order[3].name+" youngest", func(t *testing.T) {
			run := runKnot(t, after, order)
			requireVictim(t, run, "H2", after, 2)
		})
	}
}

// mutexFunc adapts a pair of functions to mutex.
type mutexFunc struct {
	lock   func(context.Context) (context.Context, error)
	unlock func(context.Context) error
}

func (m mutexFunc) Lock(ctx context.Context) (context.Context, error) { return m.lock(ctx) }
func (m mutexFunc) Unlock(ctx context.Context) error                  { return m.unlock(ctx) }

// A wait that was granted, whose record's delete was
// lost, is no wait. R waits long enough to publish its record, then is
// granted; its record is put back as the lost DEL leaves it; W, holding
// nothing, then waits for R's hold past its first search. W must wait
// until R releases, with no deadlock reported, for every kind that can be
// waited on (a MultiLock's parts are Locks: its holder X is one here).
func TestDeadlockGrantedWaitWithALostRecordIsNoWait(t *testing.T) {
	const after = 400 * time.Millisecond
	sem := func(c *relock.Client) mutex { return semMutex{c.Semaphore("dlg", 1)} }
	for _, tc := range []struct {
		kind    string
		x, r, w func(*relock.Client) mutex
	}{
		{"lock", lockNamed("dlg"), lockNamed("dlg"), lockNamed("dlg")},
		{"fairlock", fairNamed("dlg"), fairNamed("dlg"), fairNamed("dlg")},
		{"read", writeNamed("dlg"), readNamed("dlg"), writeNamed("dlg")},
		{"write", writeNamed("dlg"), writeNamed("dlg"), writeNamed("dlg")},
		{"semaphore", sem, sem, sem},
		{"multilock part", multiNamed("dlg", "dlg2"), lockNamed("dlg"), lockNamed("dlg")},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			grantedWaitWithALostRecord(t, after, tc.x, tc.r, tc.w)
		})
	}
}

func lockNamed(name string) func(*relock.Client) mutex {
	return func(c *relock.Client) mutex { return c.Lock(name) }
}

func fairNamed(name string) func(*relock.Client) mutex {
	return func(c *relock.Client) mutex { return c.FairLock(name) }
}

func readNamed(name string) func(*relock.Client) mutex {
	return func(c *relock.Client) mutex { return c.RWLock(name).ReadLock() }
}

func writeNamed(name string) func(*relock.Client) mutex {
	return func(c *relock.Client) mutex { return c.RWLock(name).WriteLock() }
}

func multiNamed(a, b string) func(*relock.Client) mutex {
	return func(c *relock.Client) mutex { return relock.NewMultiLock(c.Lock(a), c.Lock(b)) }
}

func grantedWaitWithALostRecord(t *testing.T, after time.Duration, x, r, w func(*relock.Client) mutex) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	var events atomic.Int32
	obs := relock.WithObserver(&relock.Observer{Deadlock: func(context.Context, relock.DeadlockEvent) { events.Add(1) }})
	newClient := func() *relock.Client {
		c := relock.New(srv.Client(), relock.WithDeadlockDetection(after), obs)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	cx, cr, cw := newClient(), newClient(), newClient()
	ctx := context.Background()
	hx, err := x(cx).Lock(relock.NewOwner(ctx))
	require.NoError(t, err)

	granted := make(chan context.Context, 1)
	go func() {
		h, err := r(cr).Lock(relock.NewOwner(ctx))
		assert.NoError(t, err)
		granted <- h
	}()
	var key, record string
	require.Eventually(t, func() bool {
		keys, err := rdb.Keys(ctx, "relock:{dl:*").Result()
		require.NoError(t, err)
		if len(keys) == 1 {
			key = keys[0]
			record, _ = rdb.Get(ctx, key).Result()
		}
		return record != ""
	}, 5*time.Second, 5*time.Millisecond, "R publishes its wait record")
	require.NoError(t, x(cx).Unlock(hx))
	hr := <-granted
	// R's DEL of its record is lost: the record stays for its lease.
	require.NoError(t, rdb.Set(ctx, key, record, 2*after).Err())

	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(after * 8 / 5) // R works past W's first search
		assert.NoError(t, r(cr).Unlock(hr))
	}()
	wctx, cancel := context.WithTimeout(relock.NewOwner(ctx), 5*after)
	defer cancel()
	start := time.Now()
	hw, err := w(cw).Lock(wctx)
	require.NoError(t, err, "W waits for R, which holds what its record names")
	assert.GreaterOrEqual(t, time.Since(start), after, "W waited past its first search")
	require.NoError(t, w(cw).Unlock(hw))
	<-released
	assert.Zero(t, events.Load(), "no deadlock reported")
	require.Eventually(t, func() bool { return rdb.Exists(ctx, key).Val() == 0 }, 2*after, 10*time.Millisecond,
		"the record left behind ends with its lease")
	requireOnlyExpiringLeftovers(t, rdb)
}
