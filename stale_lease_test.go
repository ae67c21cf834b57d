package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// No waiter sleeps past what keeps it out (docs/internals.md, "No sleep
// outlasts the holder's remaining lease"): a waiter is told the end of
// what blocks it now, and whatever makes that end sooner than it was told
// wakes it. Each test below has a waiter told a long end (the watchdog's
// 30 s lease), then makes the lock free much sooner with nothing
// published (a lease that runs out), and measures how long the waiter
// takes to get the free lock: within a second, not at its fallback. The
// waiters are farWaiter Clients, whose own retries come a minute apart.

// freeWithin is how long a waiter may take to get a lock that became free
// with nothing published: its next attempt is due then.
const freeWithin = time.Second

// A hold re-entered with a longer lease (the watchdog's, by Lock on the
// hold's context, the README's nested pattern) makes the waiters sleep on
// that lease; the hand-over to a shorter one must wake them. H takes the
// lock with a 1 s lease and re-enters it with Lock; W1 (2 s lease) and W2
// queue; H unlocks twice, handing the lock to W1, whose lease then runs
// out. W2 gets the lock within freeWithin of that.
func TestNoOversleepAfterReentryWithLongerLease(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		srv := redistest.Start(t)
		rdb := srv.Client()
		name := "reentry-longer-" + k.name
		h := relock.New(srv.Client())
		c1 := relock.New(srv.Client(), farWaiter...)
		c2 := relock.New(srv.Client(), farWaiter...)
		t.Cleanup(func() { _ = h.Close(); _ = c1.Close(); _ = c2.Close() })
		key := k.keyOf(h, name)

		outer, err := k.open(h, name).TryLock(context.Background(), 0, time.Second)
		require.NoError(t, err)
		inner, err := k.open(h, name).Lock(outer) // the watchdog's 30 s lease
		require.NoError(t, err)
		require.Greater(t, pttl(t, rdb, key), 20*time.Second, "the re-entry's lease")

		handed := make(chan granted, 1)
		go func() {
			ctx, err := k.open(c1, name).TryLock(context.Background(), 20*time.Second, 2*time.Second)
			handed <- granted{ctx, err}
		}()
		require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 1 }, 5*time.Second, time.Millisecond)
		got := lockAsync(k.open(c2, name))
		require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 2 }, 5*time.Second, time.Millisecond)
		quiet(t, srv) // W1 and W2 sleep on the re-entry's lease

		require.NoError(t, k.open(h, name).Unlock(inner))
		require.NoError(t, k.open(h, name).Unlock(outer))
		mustGet(t, handed, 3*time.Second) // W1 holds for 2 s and never unlocks
		requireFreeLockTaken(t, got, key, 2*time.Second)
	})
}

// requireFreeLockTaken waits for got, a waiter's Lock, and fails when it
// came later than freeWithin after the hold it waited behind ran out, the
// lease of the hold now starting, with nothing published. key is the
// lock's, for the log.
func requireFreeLockTaken(t *testing.T, got <-chan granted, key string, lease time.Duration) context.Context {
	t.Helper()
	start := time.Now()
	ctx := mustGet(t, got, lease+freeWithin+2*time.Second)
	late := time.Since(start) - lease
	t.Logf("%s: the waiter got the lock %v after the hold's lease ran out", key, late)
	assert.Less(t, late, freeWithin, "the waiter slept past the lease of the hold it waited behind")
	return ctx
}

// The same for a MultiLock re-entered with the watchdog's lease: its parts
// keep the longer lease, and the hand-over of a part to a shorter one wakes
// the part's waiters.
func TestMultiLockNoOversleepAfterReentryWithLongerLease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	h := relock.New(srv.Client())
	c1 := relock.New(srv.Client(), farWaiter...)
	c2 := relock.New(srv.Client(), farWaiter...)
	t.Cleanup(func() { _ = h.Close(); _ = c1.Close(); _ = c2.Close() })
	m := relock.NewMultiLock(h.Lock("multi-a"), h.Lock("multi-b"))
	key := h.Lock("multi-a").Key()

	outer, err := m.TryLock(context.Background(), 0, time.Second)
	require.NoError(t, err)
	inner, err := m.Lock(outer)
	require.NoError(t, err)
	require.Greater(t, pttl(t, rdb, key), 20*time.Second, "the re-entry's lease")

	handed := make(chan granted, 1)
	go func() {
		ctx, err := c1.Lock("multi-a").TryLock(context.Background(), 20*time.Second, 2*time.Second)
		handed <- granted{ctx, err}
	}()
	require.Eventually(t, func() bool { return lockQueueLen(t, rdb, key) == 1 }, 5*time.Second, time.Millisecond)
	got := lockAsync(c2.Lock("multi-a"))
	require.Eventually(t, func() bool { return lockQueueLen(t, rdb, key) == 2 }, 5*time.Second, time.Millisecond)
	quiet(t, srv)

	require.NoError(t, m.Unlock(inner))
	require.NoError(t, m.Unlock(outer))
	mustGet(t, handed, 3*time.Second)
	requireFreeLockTaken(t, got, key, 2*time.Second)
}

// The same for a RedLock's master: a RedLock re-entered with the
// watchdog's lease hands the master's lock to a Lock waiting there with a
// shorter lease, which wakes the waiters behind it. (A RedLock's own
// waiters retry every WithRetryDelay and queue nowhere.)
func TestRedLockMasterNoOversleepAfterReentryWithLongerLease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	h := relock.New(srv.Client())
	c1 := relock.New(srv.Client(), farWaiter...)
	c2 := relock.New(srv.Client(), farWaiter...)
	t.Cleanup(func() { _ = h.Close(); _ = c1.Close(); _ = c2.Close() })
	const name = "red-reentry"
	r := relock.NewRedLock(name, []*relock.Client{h})
	key := h.Lock(name).Key()

	outer, err := r.TryLock(context.Background(), 0, time.Second)
	require.NoError(t, err)
	inner, err := r.Lock(outer)
	require.NoError(t, err)
	require.Greater(t, pttl(t, rdb, key), 20*time.Second, "the re-entry's lease on the master")

	handed := make(chan granted, 1)
	go func() {
		ctx, err := c1.Lock(name).TryLock(context.Background(), 20*time.Second, 2*time.Second)
		handed <- granted{ctx, err}
	}()
	require.Eventually(t, func() bool { return lockQueueLen(t, rdb, key) == 1 }, 5*time.Second, time.Millisecond)
	got := lockAsync(c2.Lock(name))
	require.Eventually(t, func() bool { return lockQueueLen(t, rdb, key) == 2 }, 5*time.Second, time.Millisecond)
	quiet(t, srv)

	require.NoError(t, r.Unlock(inner))
	require.NoError(t, r.Unlock(outer))
	mustGet(t, handed, 3*time.Second)
	requireFreeLockTaken(t, got, key, 2*time.Second)
}

// A reader kept out by a write hold sleeps until that hold's deadline, not
// the lock's latest: H writes with a 2 s lease and reads (a downgrade)
// with the watchdog's 30 s; R waits to read. H's write lease runs out with
// nothing published, and R reads within freeWithin of that.
func TestRWReaderToldTheWriteHoldsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	const name = "rw-told-writer"
	const writeLease = 2 * time.Second
	h := relock.New(srv.Client())
	r := relock.New(srv.Client(), farWaiter...)
	t.Cleanup(func() { _ = h.Close(); _ = r.Close() })
	l := h.RWLock(name)

	wrote := time.Now()
	wctx, err := l.WriteLock().TryLock(context.Background(), 0, writeLease)
	require.NoError(t, err)
	_, err = l.ReadLock().Lock(wctx) // the watchdog's 30 s lease
	require.NoError(t, err)
	got := readAsync(r.RWLock(name).ReadLock())
	require.Eventually(t, func() bool { return rdb.HExists(context.Background(), l.Key(), "~r").Val() }, time.Second, time.Millisecond, "R waits")
	requireFreeLockTaken(t, got, l.Key(), writeLease-time.Since(wrote))
}

// A hand-over after a downgrade wakes the readers told the write hold's
// end: H writes on the watchdog's lease; R waits to read (told H's 30 s)
// and W queues to write with a 2 s lease. H reads with a 1 s lease, ends
// its write hold, then its read hold, which hands the lock to W; W's lease
// runs out with nothing published, and R reads within freeWithin of that.
func TestRWReaderWokenOnHandOverAfterDowngrade(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	const name = "rw-downgrade-handover"
	h := relock.New(srv.Client())
	r := relock.New(srv.Client(), farWaiter...)
	w := relock.New(srv.Client(), farWaiter...)
	t.Cleanup(func() { _ = h.Close(); _ = r.Close(); _ = w.Close() })
	l := h.RWLock(name)

	hctx, err := l.WriteLock().Lock(context.Background())
	require.NoError(t, err)
	read := readAsync(r.RWLock(name).ReadLock())
	require.Eventually(t, func() bool { return rdb.HExists(context.Background(), l.Key(), "~r").Val() }, 5*time.Second, time.Millisecond, "R waits")
	wrote := make(chan granted, 1)
	go func() {
		ctx, err := w.RWLock(name).WriteLock().TryLock(context.Background(), 20*time.Second, 2*time.Second)
		wrote <- granted{ctx, err}
	}()
	require.Eventually(t, func() bool { return writersQueued(t, rdb, l) == 1 }, 5*time.Second, time.Millisecond)
	quiet(t, srv) // R and W sleep on H's lease

	rctx, err := l.ReadLock().TryLock(hctx, 0, time.Second)
	require.NoError(t, err)
	require.NoError(t, l.WriteLock().Unlock(hctx))
	require.NoError(t, l.ReadLock().Unlock(rctx))
	mustGet(t, wrote, 3*time.Second) // W holds for 2 s and never unlocks
	requireFreeLockTaken(t, read, l.Key(), 2*time.Second)
}

// readAsync takes l in a goroutine and delivers the outcome.
func readAsync(l *relock.ReadLock) <-chan granted {
	out := make(chan granted, 1)
	go func() {
		ctx, err := l.Lock(context.Background())
		out <- granted{ctx, err}
	}()
	return out
}
