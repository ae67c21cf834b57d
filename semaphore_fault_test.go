package relock_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// acquireAsync acquires n permits of s in a goroutine.
func acquireAsync(s *relock.Semaphore, n int) <-chan granted {
	ch := make(chan granted, 1)
	go func() {
		ctx, err := s.Acquire(context.Background(), n)
		ch <- granted{ctx, err}
	}()
	return ch
}

// Permits with a fixed lease come back when it ends: the holder is told
// (ErrLockLost), and a waiter is served at the lease's end, not later.
func TestSemaphoreLeaseEnds(t *testing.T) {
	noLeaks(t)
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	s := c.Semaphore("lease", 2)
	const lease = 400 * time.Millisecond
	h, err := s.TryAcquire(ctx, 2, 0, lease)
	require.NoError(t, err)
	granted := time.Now()
	got := acquireAsync(b.newClient(t).Semaphore("lease", 2), 1)
	select {
	case <-h.Done():
		require.ErrorIs(t, context.Cause(h), relock.ErrLockLost)
	case <-time.After(2 * lease):
		t.Fatal("the holder was not told its lease ended")
	}
	wctx := mustGet(t, got, 2*time.Second)
	took := time.Since(granted)
	assert.Less(t, took, lease+500*time.Millisecond, "served at the lease's end")
	assert.ErrorIs(t, s.Release(h), relock.ErrLockLost)
	require.NoError(t, wctx.Err())
}

// Without persistence a restart loses every permit: each holder is told at
// once (the Client re-checks its holds when its connection breaks), and
// the permits are there again for others.
func TestSemaphoreRestartDataLost(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	const lease = 900 * time.Millisecond
	c := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = c.Close() })
	s := c.Semaphore("restart", 3)
	ctx := context.Background()
	h1, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	h2, err := s.Acquire(ctx, 1)
	require.NoError(t, err)

	srv.Restart()
	for _, h := range []context.Context{h1, h2} {
		select {
		case <-h.Done():
			require.ErrorIs(t, context.Cause(h), relock.ErrLockLost)
		case <-time.After(2 * lease):
			t.Fatal("a holder was never told that the restart lost its permits")
		}
	}
	assert.ErrorIs(t, s.Release(h1), relock.ErrLockLost)
	h3, err := s.TryAcquire(ctx, 3, 5*time.Second, 0)
	require.NoError(t, err, "every permit is free again")
	require.NoError(t, s.Release(h3))
}

// A cut connection is ridden out: permits are renewed after it, and a
// waiter whose link was cut is still served by the release.
func TestSemaphoreConnectionCut(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	via := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = via.Close() })
	const lease = 900 * time.Millisecond
	holder := relock.New(via, relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = holder.Close() })
	waiter := relock.New(via, relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = waiter.Close() })
	s := holder.Semaphore("cut", 1)
	h, err := s.Acquire(context.Background(), 1)
	require.NoError(t, err)
	got := acquireAsync(waiter.Semaphore("cut", 1), 1)
	requireWaiters(t, relock.New(srv.Client()).Semaphore("cut", 1), 1)

	proxy.Cut()
	time.Sleep(2 * lease) // renewals past the cut
	require.NoError(t, h.Err(), "renewed across the cut")
	mustNotGet(t, got)
	released := time.Now()
	require.NoError(t, s.Release(h))
	wctx := mustGet(t, got, 5*time.Second)
	assert.Less(t, time.Since(released), lease, "served by the release, not a lease")
	require.NoError(t, waiter.Semaphore("cut", 1).Release(wctx))
}

// Replies lost after Redis ran the script: go-redis resends, and neither
// an acquisition nor a release counts twice.
func TestSemaphoreDroppedReplies(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	d := redistest.NewReplyDropper()
	rdb.AddHook(d)
	require.NoError(t, rdb.Ping(context.Background()).Err())
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	s := c.Semaphore("dropped", 3)
	ctx := context.Background()
	warm, err := s.Acquire(ctx, 1) // the scripts are loaded: a reply dropped is a script's
	require.NoError(t, err)
	require.NoError(t, s.Release(warm))
	d.Arm("evalsha", 1)
	h, err := s.TryAcquire(ctx, 2, time.Second, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Dropped())
	n, err := s.Available(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the replayed acquisition counts once")
	d.Arm("evalsha", 1)
	require.NoError(t, s.Release(h), "a replayed release is success")
	require.Equal(t, int64(2), d.Dropped())
	n, _ = s.Available(ctx)
	assert.Equal(t, 3, n, "the replayed release gives back once")
}

// A waiter that gives up leaves the queue at once: a large request that
// times out at the head lets the small ones behind it through.
func TestSemaphoreWaiterGivesUp(t *testing.T) {
	noLeaks(t)
	b := newReal(t)
	ctx := context.Background()
	s := b.newClient(t).Semaphore("giveup", 3)
	h, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	big := make(chan error, 1)
	go func() {
		_, err := b.newClient(t).Semaphore("giveup", 3).TryAcquire(ctx, 3, 300*time.Millisecond, 0)
		big <- err
	}()
	requireWaiters(t, s, 1)
	small := acquireAsync(b.newClient(t).Semaphore("giveup", 3), 1)
	requireWaiters(t, s, 2)
	require.ErrorIs(t, <-big, relock.ErrNotObtained)
	gaveUp := time.Now()
	sctx := mustGet(t, small, 2*time.Second)
	assert.Less(t, time.Since(gaveUp), 500*time.Millisecond, "served when the head left, not by a timer")
	_ = sctx
	require.NoError(t, s.Release(h))
}

// A holder process killed with SIGKILL gives nothing back: its permits come
// back when the lease it last renewed runs out, and a waiter is served then.
// A waiter process killed while queued is skipped by the release.
func TestSemaphoreProcessKilled(t *testing.T) {
	noLeaks(t)
	bin := buildHolder(t)
	srv := redistest.Start(t)
	const lease = time.Second
	start := func(take string) (*exec.Cmd, *bufio.Reader) {
		cmd := exec.Command(bin, "-kind", "sema", "-permits", "2", "-take", take, "-addr", srv.Addr(), "-name", "killed", "-lease", lease.String())
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		return cmd, bufio.NewReader(stdout)
	}
	holder, out := start("2")
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "locked "), line)

	c := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = c.Close() })
	s := c.Semaphore("killed", 2)
	deadWaiter, _ := start("1")
	requireWaiters(t, s, 1)
	require.NoError(t, deadWaiter.Process.Signal(syscall.SIGKILL))
	got := acquireAsync(s, 2)
	requireWaiters(t, s, 2)
	time.Sleep(lease) // the holder renews while alive
	mustNotGet(t, got)

	require.NoError(t, holder.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	wctx := mustGet(t, got, lease+2*time.Second)
	assert.Less(t, time.Since(killed), lease+500*time.Millisecond, "served when the dead holder's lease ran out")
	st, err := s.State(context.Background())
	require.NoError(t, err)
	assert.Equal(t, relock.SemaphoreState{Permits: 2, Used: 2, Holds: 1}, st, "the dead waiter was skipped")
	require.NoError(t, s.Release(wctx))
}
