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

// hungBound is what a call with a 300 ms deadline may take on a hung Redis:
// the deadline plus a slack well below go-redis's 3-5 s timeouts.
const (
	hungDeadline = 300 * time.Millisecond
	hungBound    = hungDeadline + 400*time.Millisecond
)

// hungLatch starts a Redis, a Client on it with every latch and semaphore
// script loaded and the latch "hung" closed with count 1, and pauses Redis
// (SIGSTOP) until the test ends.
func hungLatch(t *testing.T) (*relock.Client, *redistest.Server) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	warm := c.CountDownLatch("warm")
	_, err := warm.TrySetCount(ctx, 1)
	require.NoError(t, err)
	_, err = warm.Delete(ctx)
	require.NoError(t, err)
	require.NoError(t, warm.CountDown(ctx))
	require.NoError(t, warm.Wait(ctx))
	_, err = c.Semaphore("hung", 2).State(ctx)
	require.NoError(t, err)
	_, err = c.CountDownLatch("hung").TrySetCount(ctx, 1)
	require.NoError(t, err)
	srv.Pause()
	t.Cleanup(srv.Resume)
	return c, srv
}

// boundedOnHungRedis runs call with a 300 ms deadline and checks that it
// returns within hungBound, with an error wrapping the deadline and
// ErrUnavailable.
func boundedOnHungRedis(t *testing.T, name string, call func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hungDeadline)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	took := time.Since(start)
	assert.Less(t, took, hungBound, "%s took %v on a hung Redis with a %v deadline", name, took, hungDeadline)
	assert.ErrorIs(t, err, context.DeadlineExceeded, name)
	assert.ErrorIs(t, err, relock.ErrUnavailable, name)
	return err
}

// Wait returns by its deadline on a hung Redis, with an error wrapping
// ErrNotObtained, the deadline and ErrUnavailable, as Semaphore.Acquire's.
func TestLatchWaitReturnsByItsDeadlineOnAHungRedis(t *testing.T) {
	c, _ := hungLatch(t)
	err := boundedOnHungRedis(t, "Wait", c.CountDownLatch("hung").Wait)
	assert.ErrorIs(t, err, relock.ErrNotObtained)
	err = boundedOnHungRedis(t, "Acquire", func(ctx context.Context) error {
		_, err := c.Semaphore("hung", 2).Acquire(ctx, 1)
		return err
	})
	assert.ErrorIs(t, err, relock.ErrNotObtained, "the reference: Acquire's error")
}

// Every query and change of Semaphore and CountDownLatch returns by the
// caller's deadline on a hung Redis; a change cut short says it may still
// apply.
func TestSemaphoreAndLatchCallsReturnByTheDeadline(t *testing.T) {
	c, _ := hungLatch(t)
	s := c.Semaphore("hung", 2)
	l := c.CountDownLatch("hung")
	calls := []struct {
		name   string
		change bool
		call   func(ctx context.Context) error
	}{
		{"Semaphore.State", false, func(ctx context.Context) error { _, err := s.State(ctx); return err }},
		{"Semaphore.Available", false, func(ctx context.Context) error { _, err := s.Available(ctx); return err }},
		{"CountDownLatch.Count", false, func(ctx context.Context) error { _, err := l.Count(ctx); return err }},
		{"CountDownLatch.TrySetCount", true, func(ctx context.Context) error { _, err := l.TrySetCount(ctx, 2); return err }},
		{"CountDownLatch.CountDown", true, l.CountDown},
		{"CountDownLatch.Delete", true, func(ctx context.Context) error { _, err := l.Delete(ctx); return err }},
		{"Lock.IsLocked", false, func(ctx context.Context) error { _, err := c.Lock("hung").IsLocked(ctx); return err }},
	}
	for _, k := range calls {
		err := boundedOnHungRedis(t, k.name, k.call)
		if k.change {
			assert.ErrorContains(t, err, "may still apply", k.name)
		}
	}
}

// After Close, the queries of every kind and the releases of every kind
// work, RedLock's included; whatever may start something new fails with
// ErrClientClosed.
func TestQueriesAndReleasesWorkAfterClose(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := relock.New(rdb)
	ctx := context.Background()
	lk, fl, rw := c.Lock("closed"), c.FairLock("closed"), c.RWLock("closed")
	s, latch := c.Semaphore("closed", 2), c.CountDownLatch("closed")
	red := relock.NewRedLock("closed-red", []*relock.Client{c})
	hl, err := lk.Lock(ctx)
	require.NoError(t, err)
	hf, err := fl.Lock(ctx)
	require.NoError(t, err)
	hr, err := rw.ReadLock().Lock(ctx)
	require.NoError(t, err)
	hs, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	hred, err := red.Lock(ctx)
	require.NoError(t, err)
	_, err = latch.TrySetCount(ctx, 2)
	require.NoError(t, err)
	other := relock.New(rdb) // a live hold of another process, for the queries to see
	t.Cleanup(func() { _ = other.Close() })
	ho, err := other.Lock("closed-other").Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Close()) // releases c's holds

	locked, err := c.Lock("closed-other").IsLocked(ctx)
	require.NoError(t, err, "Lock.IsLocked")
	assert.True(t, locked)
	ttl, err := c.Lock("closed-other").TTL(ctx)
	require.NoError(t, err, "Lock.TTL")
	assert.Positive(t, ttl)
	n, err := lk.HoldCount(hl)
	require.NoError(t, err, "Lock.HoldCount")
	assert.Zero(t, n, "Close released it")
	locked, err = fl.IsLocked(ctx)
	require.NoError(t, err, "FairLock.IsLocked")
	assert.False(t, locked)
	locked, err = rw.ReadLock().IsLocked(ctx)
	require.NoError(t, err, "ReadLock.IsLocked")
	assert.False(t, locked)
	locked, err = rw.WriteLock().IsLocked(ctx)
	require.NoError(t, err, "WriteLock.IsLocked")
	assert.False(t, locked)
	st, err := s.State(ctx)
	require.NoError(t, err, "Semaphore.State")
	assert.Equal(t, relock.SemaphoreState{Permits: 2}, st)
	free, err := s.Available(ctx)
	require.NoError(t, err, "Semaphore.Available")
	assert.Equal(t, 2, free)
	count, err := latch.Count(ctx)
	require.NoError(t, err, "CountDownLatch.Count")
	assert.Equal(t, 2, count)
	insp, err := c.Inspect(ctx, "closed")
	require.NoError(t, err, "Inspect")
	assert.True(t, insp.Exists())
	sums, err := c.ListLocks(ctx, "closed*")
	require.NoError(t, err, "ListLocks")
	assert.NotEmpty(t, sums)
	require.NoError(t, other.Lock("closed-other").Unlock(ho))

	// What may start something new fails.
	_, err = lk.Lock(ctx)
	assert.ErrorIs(t, err, relock.ErrClientClosed, "Lock")
	_, err = s.Acquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrClientClosed, "Acquire")
	_, err = red.Lock(ctx)
	assert.ErrorIs(t, err, relock.ErrClientClosed, "RedLock.Lock")
	_, err = latch.TrySetCount(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrClientClosed, "TrySetCount")
	assert.ErrorIs(t, latch.Wait(ctx), relock.ErrClientClosed, "Wait")

	// Every release works: Close released the holds already.
	require.NoError(t, lk.Unlock(hl), "Lock.Unlock")
	require.NoError(t, fl.Unlock(hf), "FairLock.Unlock")
	require.NoError(t, rw.ReadLock().Unlock(hr), "ReadLock.Unlock")
	require.NoError(t, s.Release(hs), "Semaphore.Release")
	require.NoError(t, red.Unlock(hred), "RedLock.Unlock")
	_, err = rdb.Del(ctx, latch.Key()).Result()
	require.NoError(t, err)
	requireOnlyExpiringLeftovers(t, rdb)
}
