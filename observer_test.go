package relock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// events records every Observer call, in order, as one line each, and keeps
// the events themselves for closer checks.
type events struct {
	mu       sync.Mutex
	lines    []string
	acquired []relock.AcquiredEvent
	released []relock.ReleasedEvent
	lost     []relock.LostEvent
	waits    []relock.WaitEvent
	ctxs     []context.Context // of the hooks that get one
	waiting  atomic.Int64      // WaitStarted - WaitEnded
}

func (ev *events) add(ctx context.Context, line string) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.lines = append(ev.lines, line)
	if ctx != nil {
		ev.ctxs = append(ev.ctxs, ctx)
	}
}

func (ev *events) observer() *relock.Observer {
	return &relock.Observer{
		Acquired: func(ctx context.Context, e relock.AcquiredEvent) {
			ev.mu.Lock()
			ev.acquired = append(ev.acquired, e)
			ev.mu.Unlock()
			ev.add(ctx, fmt.Sprintf("acquired %s reentry=%v", e.Name, e.Reentry))
		},
		Released: func(ctx context.Context, e relock.ReleasedEvent) {
			ev.mu.Lock()
			ev.released = append(ev.released, e)
			ev.mu.Unlock()
			ev.add(ctx, fmt.Sprintf("released %s final=%v", e.Name, e.Final))
		},
		Lost: func(e relock.LostEvent) {
			ev.mu.Lock()
			ev.lost = append(ev.lost, e)
			ev.mu.Unlock()
			ev.add(nil, fmt.Sprintf("lost %s %s", e.Name, e.Reason))
		},
		WaitStarted: func(ctx context.Context, l relock.LockInfo) {
			ev.waiting.Add(1)
			ev.add(ctx, "wait started "+l.Name)
		},
		Woken: func(ctx context.Context, l relock.LockInfo) {
			ev.add(ctx, "woken "+l.Name)
		},
		WaitEnded: func(ctx context.Context, e relock.WaitEvent) {
			ev.waiting.Add(-1)
			ev.mu.Lock()
			ev.waits = append(ev.waits, e)
			ev.mu.Unlock()
			ev.add(ctx, fmt.Sprintf("wait ended %s not_obtained=%v", e.Name, e.NotObtained))
		},
	}
}

func (ev *events) snapshot() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]string(nil), ev.lines...)
}

func (ev *events) count(line string) int {
	n := 0
	for _, l := range ev.snapshot() {
		if l == line {
			n++
		}
	}
	return n
}

func (ev *events) lostEvents() []relock.LostEvent {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]relock.LostEvent(nil), ev.lost...)
}

// Close releases every hold still open and reports each as Released (final),
// once per hold however many entries it has, never as Lost; nothing more
// comes for it afterwards: not the Unlock that a deferred call still makes,
// not the lease that later runs out.
func TestObserverCloseReportsOpenHoldsReleased(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ev := &events{}
		c := relock.New(b.rdb, relock.WithObserver(ev.observer()))
		bg := context.Background()
		a, err := c.Lock("a").Lock(bg)
		require.NoError(t, err)
		inner, err := c.Lock("a").Lock(a) // a re-entry: still one hold
		require.NoError(t, err)
		leased, err := c.Lock("b").TryLock(bg, 0, 300*time.Millisecond)
		require.NoError(t, err)
		done, err := c.Lock("c").Lock(bg)
		require.NoError(t, err)
		require.NoError(t, c.Lock("c").Unlock(done)) // ended before Close

		require.NoError(t, c.Close())
		for _, h := range []context.Context{a, inner, leased} {
			<-h.Done()
			require.ErrorIs(t, context.Cause(h), relock.ErrClientClosed)
		}
		require.Empty(t, ev.lostEvents(), "Close ended them itself: %v", ev.snapshot())
		for _, name := range []string{"a", "b", "c"} {
			assert.Equal(t, 1, ev.count("released "+name+" final=true"), "%v", ev.snapshot())
			assert.Empty(t, hgetall(t, b.rdb, c.Lock(name).Key()), "Close freed %s in Redis", name)
		}

		// A deferred Unlock after Close has nothing to do, and reports nothing.
		require.NoError(t, c.Lock("a").Unlock(inner))
		require.NoError(t, c.Lock("a").Unlock(a))
		time.Sleep(400 * time.Millisecond) // b's lease would have run out meanwhile
		assert.Empty(t, ev.lostEvents(), "no Lost afterwards: %v", ev.snapshot())
		assert.Equal(t, 1, ev.count("released a final=true"), "no second Released: %v", ev.snapshot())
		assert.Zero(t, ev.count("released a final=false"), "%v", ev.snapshot())
	})
}

// A waiter woken by the holder's Unlock: WaitStarted once, Woken, exactly one
// WaitEnded, then its Acquired; the hooks get the caller's context.
func TestObserverWaitWokenByUnlock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ev := &events{}
		c := b.newClient(t, relock.WithObserver(ev.observer()))
		l := c.Lock("w")
		holder, err := l.Lock(context.Background())
		require.NoError(t, err)

		type key struct{}
		caller := context.WithValue(context.Background(), key{}, "waiter")
		got := make(chan error, 1)
		var waiterCtx context.Context
		go func() {
			var err error
			waiterCtx, err = l.Lock(caller)
			got <- err
		}()
		require.Eventually(t, func() bool { return ev.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)
		time.Sleep(50 * time.Millisecond) // asleep on the channel
		require.NoError(t, l.Unlock(holder))
		require.NoError(t, <-got)
		require.NoError(t, l.Unlock(waiterCtx))

		lines := ev.snapshot()
		assert.Equal(t, 1, ev.count("wait started w"), "%v", lines)
		assert.Equal(t, 1, ev.count("wait ended w not_obtained=false"), "%v", lines)
		assert.GreaterOrEqual(t, ev.count("woken w"), 1, "%v", lines)
		assert.Zero(t, ev.waiting.Load())
		// Order: started before every woken, woken before the end, the end
		// before the waiter's Acquired.
		at := func(line string) int {
			for i, l := range lines {
				if l == line {
					return i
				}
			}
			return -1
		}
		lastAt := func(line string) int {
			n := -1
			for i, l := range lines {
				if l == line {
					n = i
				}
			}
			return n
		}
		assert.Less(t, at("wait started w"), at("woken w"), "%v", lines)
		assert.Less(t, lastAt("woken w"), at("wait ended w not_obtained=false"), "%v", lines)
		assert.Less(t, at("wait ended w not_obtained=false"), lastAt("acquired w reentry=false"), "%v", lines)

		ev.mu.Lock()
		defer ev.mu.Unlock()
		for _, ctx := range ev.ctxs {
			require.NotNil(t, ctx)
		}
		var waiterHooks int
		for _, ctx := range ev.ctxs {
			if ctx.Value(key{}) == "waiter" {
				waiterHooks++
			}
		}
		// WaitStarted, Woken (at least once), WaitEnded, Acquired and the
		// waiter's Released got the waiter's context.
		assert.GreaterOrEqual(t, waiterHooks, 5)
		last := ev.acquired[len(ev.acquired)-1]
		assert.True(t, last.Contended)
		assert.GreaterOrEqual(t, last.Attempts, 2)
		assert.Equal(t, ev.waits[0].Attempts, last.Attempts)
	})
}

// A waiter that gives up: one WaitStarted, one WaitEnded with NotObtained and
// the error Lock returned, no Acquired.
func TestObserverWaitGivesUp(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ev := &events{}
		c := b.newClient(t, relock.WithObserver(ev.observer()))
		l := c.Lock("g")
		holder, err := l.Lock(context.Background())
		require.NoError(t, err)
		_, err = l.TryLock(context.Background(), 100*time.Millisecond, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err = l.Lock(ctx)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.NoError(t, l.Unlock(holder))

		assert.Equal(t, 2, ev.count("wait started g"), "%v", ev.snapshot())
		assert.Equal(t, 2, ev.count("wait ended g not_obtained=true"), "%v", ev.snapshot())
		assert.Zero(t, ev.waiting.Load())
		// A TryLock that does not wait reports no wait at all.
		holder, err = l.Lock(context.Background())
		require.NoError(t, err)
		_, err = l.TryLock(context.Background(), 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.NoError(t, l.Unlock(holder))
		assert.Equal(t, 2, countPrefix(ev.snapshot(), "wait started"), "%v", ev.snapshot())

		ev.mu.Lock()
		defer ev.mu.Unlock()
		assert.Len(t, ev.acquired, 2, "only the holder")
		for _, w := range ev.waits {
			assert.ErrorIs(t, w.Err, relock.ErrNotObtained)
			assert.GreaterOrEqual(t, w.Waited, 90*time.Millisecond)
		}
	})
}

// Many goroutines contending, some giving up: every WaitStarted is matched
// by one WaitEnded, so a gauge of current waiters comes back to zero.
func TestObserverWaitersGaugeBalances(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ev := &events{}
		c := b.newClient(t, relock.WithObserver(ev.observer()))
		l := c.Lock("gauge")
		var wg sync.WaitGroup
		var got, gaveUp atomic.Int64
		for i := range 8 {
			wg.Go(func() {
				for range 5 {
					h, err := l.TryLock(context.Background(), time.Duration(20+10*i)*time.Millisecond, 0)
					if err != nil {
						gaveUp.Add(1)
						continue
					}
					got.Add(1)
					time.Sleep(5 * time.Millisecond)
					assert.NoError(t, l.Unlock(h))
				}
			})
		}
		wg.Wait()
		assert.Zero(t, ev.waiting.Load(), "WaitStarted - WaitEnded")
		// A TryLock whose wait ran out during its first attempt never slept,
		// and reports no wait: at most one give-up event per failed call.
		assert.LessOrEqual(t, countPrefix(ev.snapshot(), "wait ended gauge not_obtained=true"), int(gaveUp.Load()))
		t.Logf("%d acquired, %d gave up, %d waits", got.Load(), gaveUp.Load(), countPrefix(ev.snapshot(), "wait started"))
	})
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// A re-entry runs the acquire script once (Redis counts it), and says so:
// Attempts 1, Reentry, not contended.
func TestObserverReentryAttempts(t *testing.T) {
	b := newMini(t)
	ev := &events{}
	c := b.newClient(t, relock.WithObserver(ev.observer()))
	l := c.Lock("r")
	outer, err := l.Lock(context.Background())
	require.NoError(t, err)
	inner, err := l.Lock(outer)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(inner))
	require.NoError(t, l.Unlock(outer))
	ev.mu.Lock()
	defer ev.mu.Unlock()
	require.Len(t, ev.acquired, 2)
	assert.Equal(t, 1, ev.acquired[0].Attempts)
	assert.False(t, ev.acquired[0].Reentry)
	assert.Equal(t, 1, ev.acquired[1].Attempts)
	assert.True(t, ev.acquired[1].Reentry)
	assert.False(t, ev.acquired[1].Contended)
	require.Len(t, ev.released, 2)
	assert.False(t, ev.released[0].Final)
	assert.True(t, ev.released[1].Final)
}

// Each way a hold is lost gets its reason; the cause is the hold context's.
func TestObserverLossReasons(t *testing.T) {
	b := newReal(t)
	ev := &events{}
	c := b.newClient(t, relock.WithObserver(ev.observer()), relock.WithWatchdogLease(600*time.Millisecond))
	bg := context.Background()
	waitLost := func(name string, h context.Context, want relock.LossReason) {
		t.Helper()
		select {
		case <-h.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: not lost", name)
		}
		require.Eventually(t, func() bool {
			for _, e := range ev.lostEvents() {
				if e.Name == name {
					return true
				}
			}
			return false
		}, time.Second, time.Millisecond)
		for _, e := range ev.lostEvents() {
			if e.Name == name {
				assert.Equal(t, want, e.Reason, name)
				assert.Equal(t, context.Cause(h), e.Cause, name)
				assert.ErrorIs(t, e.Cause, relock.ErrLockLost, name)
			}
		}
	}

	// A lease that runs out.
	h, err := c.Lock("expired").TryLock(bg, 0, 100*time.Millisecond)
	require.NoError(t, err)
	waitLost("expired", h, relock.LossExpired)

	// ForceUnlock.
	h, err = c.Lock("forced").Lock(bg)
	require.NoError(t, err)
	_, err = c.Lock("forced").ForceUnlock(bg)
	require.NoError(t, err)
	waitLost("forced", h, relock.LossForceUnlocked)

	// The key deleted behind the holder's back; the watchdog finds out.
	h, err = c.Lock("gone").Lock(bg)
	require.NoError(t, err)
	require.NoError(t, b.rdb.Del(bg, c.Lock("gone").Key()).Err())
	c.WatchdogTick()
	waitLost("gone", h, relock.LossGone)

	// An Unlock that finds the hold gone.
	h, err = c.Lock("unlock-gone").TryLock(bg, 0, time.Minute)
	require.NoError(t, err)
	require.NoError(t, b.rdb.Del(bg, c.Lock("unlock-gone").Key()).Err())
	require.ErrorIs(t, c.Lock("unlock-gone").Unlock(h), relock.ErrLockLost)
	waitLost("unlock-gone", h, relock.LossGone)

	// Renewals that fail until the lease runs out: the server hangs.
	h, err = c.Lock("unrenewed").Lock(bg)
	require.NoError(t, err)
	b.srv.Pause()
	t.Cleanup(b.srv.Resume)
	waitLost("unrenewed", h, relock.LossRenewalFailed)
	b.srv.Resume()

	assert.Len(t, ev.lostEvents(), 5, "one Lost per hold: %v", ev.snapshot())
	// No Released for a lost hold, not even the Unlock that found it gone.
	assert.Zero(t, countPrefix(ev.snapshot(), "released"), "%v", ev.snapshot())
}

// MultiLock: Acquired and Released per part (Kind lock, the part's name, on
// the part's Client); its wait as one WaitStarted / WaitEnded of Kind
// multilock on the first part's Client.
func TestObserverMultiLock(t *testing.T) {
	b := newMini(t)
	ev := &events{}
	c := b.newClient(t, relock.WithObserver(ev.observer()))
	var waits []relock.LockInfo
	var mu sync.Mutex
	obs := ev.observer()
	started := obs.WaitStarted
	obs.WaitStarted = func(ctx context.Context, l relock.LockInfo) {
		mu.Lock()
		waits = append(waits, l)
		mu.Unlock()
		started(ctx, l)
	}
	c2 := b.newClient(t, relock.WithObserver(obs))
	m := relock.NewMultiLock(c.Lock("x"), c.Lock("y"))
	m2 := relock.NewMultiLock(c2.Lock("x"), c2.Lock("y"))
	h, err := m.Lock(context.Background())
	require.NoError(t, err)
	inner, err := m.Lock(h)
	require.NoError(t, err)
	require.NoError(t, m.Unlock(inner))

	got := make(chan context.Context)
	go func() {
		h2, err := m2.Lock(context.Background())
		assert.NoError(t, err)
		got <- h2
	}()
	require.Eventually(t, func() bool { return ev.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, m.Unlock(h))
	require.NoError(t, m2.Unlock(<-got))

	assert.Equal(t, 2, ev.count("acquired x reentry=false"), "once by each MultiLock: %v", ev.snapshot())
	assert.Equal(t, 2, ev.count("acquired y reentry=false"), "once by each MultiLock: %v", ev.snapshot())
	assert.Equal(t, 1, ev.count("acquired x reentry=true"), "%v", ev.snapshot())
	assert.Equal(t, 1, ev.count("released y final=false"), "%v", ev.snapshot())
	assert.Equal(t, 2, ev.count("released x final=true"), "%v", ev.snapshot())
	assert.Equal(t, 1, ev.count("wait ended x,y not_obtained=false"), "%v", ev.snapshot())
	assert.Zero(t, ev.waiting.Load())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, waits, 1)
	assert.Equal(t, relock.LockInfo{Name: "x,y", Kind: relock.KindMultiLock}, waits[0])
}

// An unconfirmed Unlock still ends the hold for the Observer: a final
// Released with the error.
func TestObserverUnconfirmedUnlock(t *testing.T) {
	b := newMini(t)
	ev := &events{}
	c := b.newClient(t, relock.WithObserver(ev.observer()))
	l := c.Lock("u")
	h, err := l.TryLock(context.Background(), 0, time.Second)
	require.NoError(t, err)
	b.mini.SetError("LOADING Redis is loading the dataset in memory")
	err = l.Unlock(h)
	b.mini.SetError("")
	require.Error(t, err)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	require.Len(t, ev.released, 1)
	assert.True(t, ev.released[0].Final)
	assert.Error(t, ev.released[0].Err)
	assert.False(t, errors.Is(ev.released[0].Err, relock.ErrLockLost))
}
