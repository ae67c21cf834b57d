package relock_test

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// The hand-over of an RWLock's write hold across processes: waiting writers
// queue in the lock hash (~q) and the release that frees the lock grants the
// write hold to the first whose Client still listens.

// quiet waits until the server runs no more scripts: every waiter has made
// its attempts (the one after its subscription's confirmation included) and
// sleeps.
func quiet(t *testing.T, srv *redistest.Server) {
	t.Helper()
	last, stable := scriptCalls(t, srv), 0
	require.Eventually(t, func() bool {
		if n := scriptCalls(t, srv); n != last {
			last, stable = n, 0
			return false
		}
		stable++
		return stable >= 5
	}, 10*time.Second, 20*time.Millisecond)
}

// Writers in three processes queue in arrival order and each is handed the
// write hold by the release before it: the only scripts run are the four
// releases — no waiter makes an attempt.
func TestRWHandOverWritersInOrderAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	const name = "rw-order"
	holder := relock.New(rdb)
	t.Cleanup(func() { _ = holder.Close() })
	// Load the release script, so that its NOSCRIPT reply does not count.
	warm, err := holder.RWLock("warm").WriteLock().Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, holder.RWLock("warm").WriteLock().Unlock(warm))
	l := holder.RWLock(name)
	hctx, err := l.WriteLock().Lock(context.Background())
	require.NoError(t, err)
	first := token(t, l.WriteLock(), hctx)

	type grant struct {
		who   int
		ctx   context.Context
		token int64
	}
	got := make(chan grant, 3)
	release := make(chan struct{})
	for i := range 3 {
		// A long waiter timeout: no claim renewal falls into the test.
		c := relock.New(srv.Client(), relock.WithWaiterTimeout(time.Minute))
		t.Cleanup(func() { _ = c.Close() })
		w := c.RWLock(name).WriteLock()
		go func() {
			ctx, err := w.Lock(context.Background())
			if !assert.NoError(t, err) {
				return
			}
			got <- grant{i, ctx, token(t, w, ctx)}
			<-release
			assert.NoError(t, w.Unlock(ctx))
		}()
		require.Eventually(t, func() bool { return writersQueued(t, rdb, l) == i+1 }, 5*time.Second, time.Millisecond)
		require.Eventually(t, func() bool {
			ch := l.Key() + ":w:" + c.ID()
			n, err := rdb.PubSubNumSub(context.Background(), ch).Result()
			return err == nil && n[ch] == 1
		}, 5*time.Second, time.Millisecond)
	}
	quiet(t, srv)

	before := scriptCalls(t, srv)
	require.NoError(t, l.WriteLock().Unlock(hctx))
	last := first
	for want := range 3 {
		g := <-got
		assert.Equal(t, want, g.who, "handed over in arrival order")
		assert.Greater(t, g.token, last)
		last = g.token
		assert.Len(t, holders(t, &backend{rdb: rdb}, l), 1)
		release <- struct{}{}
	}
	require.Eventually(t, func() bool { return len(heldKeys(t, rdb, defaultLatch)) == 0 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int64(4), scriptCalls(t, srv)-before, "four releases, no attempt")
}

// startWriterProcess starts internal/holderproc waiting for the write lock
// of the RWLock name (queued in Redis), holding it once it has it until it
// is killed.
func startWriterProcess(t *testing.T, bin string, srv *redistest.Server, name string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd, _, exited := startHolderProcess(t, bin, "-addr", srv.Addr(), "-name", name, "-kind", "write")
	return cmd, exited
}

// A writer process killed with SIGKILL while queued is skipped at the
// release that frees the lock: its Client's channel has no subscriber any
// more, so the write hold goes to the next writer at once. Bound: no delay
// (the hand-off is measured against the next writer's fallback, a third of
// its one-minute waiter timeout, and the killed writer's 30 s lease, which a
// grant to it would have cost). Readers behind the dead claim then go in as
// soon as that writer releases.
func TestRWHandOverSkipsAWriterKilledWhileQueued(t *testing.T) {
	noLeaks(t)
	bin := buildHolder(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	const name = "rw-killed"
	holder := relock.New(rdb)
	t.Cleanup(func() { _ = holder.Close() })
	l := holder.RWLock(name)
	rctx, err := l.ReadLock().Lock(context.Background())
	require.NoError(t, err)

	proc, exited := startWriterProcess(t, bin, srv, name)
	require.Eventually(t, func() bool { return writersQueued(t, rdb, l) == 1 }, 10*time.Second, time.Millisecond)
	waiter := relock.New(srv.Client(), relock.WithWaiterTimeout(time.Minute))
	t.Cleanup(func() { _ = waiter.Close() })
	got := lockAsync(waiter.RWLock(name).WriteLock())
	require.Eventually(t, func() bool { return writersQueued(t, rdb, l) == 2 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
	_, err = holder.RWLock(name).ReadLock().TryLock(context.Background(), 0, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained, "new readers wait behind the claims")

	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	<-exited
	procChannels := func() int {
		chans, err := rdb.PubSubChannels(context.Background(), l.Key()+":w:*").Result()
		require.NoError(t, err)
		return len(chans)
	}
	require.Eventually(t, func() bool { return procChannels() == 1 }, 5*time.Second, time.Millisecond)

	unlocked := time.Now()
	require.NoError(t, l.ReadLock().Unlock(rctx))
	wctx := mustGet(t, got, 2*time.Second)
	elapsed := time.Since(unlocked)
	t.Logf("write hand-off past a killed writer: %v", elapsed)
	assert.Less(t, elapsed, time.Second, "the hand-off took the fallback")
	assert.Equal(t, map[string]string{"w:" + ownerField(t, waiter, wctx): "1"}, holders(t, &backend{rdb: rdb}, l))
	assert.Zero(t, writersQueued(t, rdb, l), "the killed writer's entry is gone")

	reader := make(chan granted, 1)
	go func() {
		ctx, err := holder.RWLock(name).ReadLock().Lock(context.Background())
		reader <- granted{ctx, err}
	}()
	require.Eventually(t, func() bool { return holder.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, waiter.RWLock(name).WriteLock().Unlock(wctx))
	r := mustGet(t, reader, time.Second)
	require.NoError(t, holder.RWLock(name).ReadLock().Unlock(r))
	assert.Empty(t, heldKeys(t, rdb, defaultLatch))
}

// A writer frozen (SIGSTOP) while queued still has its connection, so the
// release grants it the write hold: the others then wait for its lease, as
// for a frozen holder. That is the stated limit; here it is the default
// watchdog lease, so only the grant is checked.
func TestRWHandOverGrantsAFrozenWriter(t *testing.T) {
	bin := buildHolder(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	const name = "rw-frozen"
	holder := relock.New(rdb)
	t.Cleanup(func() { _ = holder.Close() })
	l := holder.RWLock(name)
	hctx, err := l.WriteLock().Lock(context.Background())
	require.NoError(t, err)
	proc, _ := startWriterProcess(t, bin, srv, name)
	t.Cleanup(func() { _ = proc.Process.Signal(syscall.SIGCONT) })
	require.Eventually(t, func() bool { return writersQueued(t, rdb, l) == 1 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		chans, err := rdb.PubSubChannels(context.Background(), l.Key()+":w:*").Result()
		return err == nil && len(chans) == 1
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, proc.Process.Signal(syscall.SIGSTOP))
	require.NoError(t, l.WriteLock().Unlock(hctx))
	h := holders(t, &backend{rdb: rdb}, l)
	require.Len(t, h, 1, "granted to the frozen process")
	assert.NotContains(t, h, "w:"+ownerField(t, holder, hctx))
}

// A release, a read and a write, that nobody waits for publishes nothing;
// neither does a re-entry's release.
func TestRWReleaseWithoutWaitersPublishesNothing(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	l := c.RWLock("rw-quiet")
	publishes := func() int64 {
		m, err := redistest.CommandCalls(context.Background(), srv.Client())
		require.NoError(t, err)
		return m["publish"] + m["spublish"]
	}
	before := publishes()
	for range 3 {
		w, err := l.WriteLock().Lock(context.Background())
		require.NoError(t, err)
		r, err := l.ReadLock().Lock(w)
		require.NoError(t, err)
		require.NoError(t, l.WriteLock().Unlock(w)) // downgrade
		r2, err := l.ReadLock().Lock(context.Background())
		require.NoError(t, err)
		require.NoError(t, l.ReadLock().Unlock(r2))
		require.NoError(t, l.ReadLock().Unlock(r))
	}
	assert.Equal(t, before, publishes())
}
