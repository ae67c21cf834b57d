package relock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

func TestSemaphoreAcquireRelease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		c := b.newClient(t)
		s := c.Semaphore("pool", 3)
		h1, err := s.Acquire(ctx, 2)
		require.NoError(t, err)
		h2, err := s.TryAcquire(ctx, 1, 0, 0)
		require.NoError(t, err)
		_, err = s.TryAcquire(ctx, 1, 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained, "all 3 permits are held")
		n, err := s.Available(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n)

		require.NoError(t, s.Release(h1))
		assert.ErrorIs(t, context.Cause(h1), relock.ErrUnlocked)
		assert.NoError(t, h2.Err(), "releasing one acquisition leaves the other")
		n, err = s.Available(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.ErrorIs(t, s.Release(h1), relock.ErrNotHeld, "a second release changes nothing")
		n, _ = s.Available(ctx)
		assert.Equal(t, 2, n)

		require.NoError(t, s.Release(h2))
		requireOnlyExpiringLeftovers(t, b.rdb)
	})
}

// Each Acquire is its own hold, also with the context of another: nested
// acquisitions take permits of their own and Release ends exactly the
// nearest one.
func TestSemaphoreNestedAcquisitionsAreSeparate(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	s := b.newClient(t).Semaphore("nest", 2)
	outer, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	inner, err := s.Acquire(outer, 1)
	require.NoError(t, err)
	_, err = s.TryAcquire(inner, 1, 0, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained, "no re-entry: a third permit does not exist")
	require.NoError(t, s.Release(inner))
	assert.NoError(t, outer.Err(), "the outer acquisition is still held")
	n, _ := s.Available(ctx)
	assert.Equal(t, 1, n)
	require.NoError(t, s.Release(outer))
	n, _ = s.Available(ctx)
	assert.Equal(t, 2, n)
}

func TestSemaphoreBadInput(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	for _, p := range []int{0, -1} {
		_, err := c.Semaphore("x", p).Acquire(ctx, 1)
		assert.ErrorIs(t, err, relock.ErrInvalidArgument, "capacity %d", p)
	}
	s := c.Semaphore("x", 3)
	for _, n := range []int{0, -2, 4} {
		_, err := s.Acquire(ctx, n)
		assert.ErrorIs(t, err, relock.ErrInvalidArgument, "n=%d", n)
	}
	_, err := c.Semaphore("", 3).Acquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	assert.ErrorIs(t, s.Release(ctx), relock.ErrNotHeld)
	assert.ErrorIs(t, s.SetPermits(ctx, 0), relock.ErrInvalidArgument)
	//nolint:staticcheck // a nil context is the bad input under test
	assert.ErrorIs(t, s.Release(nil), relock.ErrInvalidArgument)
	_, err = s.TryAcquire(ctx, 1, -time.Second, 0)
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	assert.Empty(t, allKeys(t, b.rdb), "bad input sends nothing")
}

func TestSemaphoreCapacityMismatch(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	h, err := c.Semaphore("cap", 3).Acquire(ctx, 1)
	require.NoError(t, err)
	before := hgetall(t, b.rdb, c.Semaphore("cap", 3).Key())
	_, err = c.Semaphore("cap", 4).TryAcquire(ctx, 1, time.Second, 0)
	require.ErrorIs(t, err, relock.ErrInvalidArgument)
	assert.Equal(t, before, hgetall(t, b.rdb, c.Semaphore("cap", 3).Key()), "a mismatch changes nothing")

	// SetPermits is the explicit change; the old capacity then mismatches.
	s4 := c.Semaphore("cap", 4)
	require.NoError(t, s4.SetPermits(ctx, 4))
	h2, err := s4.TryAcquire(ctx, 3, 0, 0)
	require.NoError(t, err, "4 permits now: 1 + 3")
	_, err = c.Semaphore("cap", 3).TryAcquire(ctx, 1, 0, 0)
	require.ErrorIs(t, err, relock.ErrInvalidArgument)
	require.NoError(t, s4.Release(h2))
	require.NoError(t, c.Semaphore("cap", 3).Release(h))
}

// A large request at the head is not starved by small ones behind it, and
// a release wakes only the waiters its permits serve.
func TestSemaphoreFIFOLargeRequestFirst(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c1, c2 := b.newClient(t), b.newClient(t)
	s1, s2 := c1.Semaphore("fifo", 3), c2.Semaphore("fifo", 3)
	hold, err := s1.Acquire(ctx, 2)
	require.NoError(t, err)

	bigGot := make(chan context.Context, 1)
	go func() {
		h, err := s2.Acquire(ctx, 3) // needs every permit: waits at the head
		assert.NoError(t, err)
		bigGot <- h
	}()
	requireWaiters(t, s1, 1)
	// One permit is free, but the large request is ahead: a small one waits.
	_, err = s1.TryAcquire(ctx, 1, 150*time.Millisecond, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained, "a newcomer never passes a waiter")
	smallGot := make(chan context.Context, 1)
	go func() {
		h, err := s1.Acquire(ctx, 1)
		assert.NoError(t, err)
		smallGot <- h
	}()
	requireWaiters(t, s1, 2)

	released := time.Now()
	require.NoError(t, s1.Release(hold))
	var big context.Context
	select {
	case big = <-bigGot:
		assert.Less(t, time.Since(released), 2*time.Second, "handed over in the release, not by a lease")
	case <-time.After(10 * time.Second):
		t.Fatal("the large request was not served")
	}
	select {
	case <-smallGot:
		t.Fatal("the small request got a permit while the large one holds all 3")
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, s2.Release(big))
	select {
	case h := <-smallGot:
		require.NoError(t, s1.Release(h))
	case <-time.After(5 * time.Second):
		t.Fatal("the small request was not served")
	}
}

// requireWaiters waits until Redis records n waiters of s.
func requireWaiters(t *testing.T, s *relock.Semaphore, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := s.State(context.Background())
		return err == nil && st.Waiters == n
	}, 5*time.Second, 5*time.Millisecond, "waiters queued in Redis")
}

// One release of one permit wakes one waiter of many: the others never try.
func TestSemaphoreReleaseWakesOnlyServedWaiters(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	var woken atomic.Int32
	obs := &relock.Observer{Woken: func(context.Context, relock.LockInfo) { woken.Add(1) }}
	holder := b.newClient(t)
	s := holder.Semaphore("herd", 1)
	h, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	const waiters = 6
	type held struct {
		s *relock.Semaphore
		h context.Context
	}
	got := make(chan held, waiters)
	for range waiters {
		sw := b.newClient(t, relock.WithObserver(obs)).Semaphore("herd", 1)
		go func() {
			hc, err := sw.Acquire(ctx, 1)
			if assert.NoError(t, err) {
				got <- held{sw, hc}
			}
		}()
	}
	requireWaiters(t, s, waiters)
	woken.Store(0)
	require.NoError(t, s.Release(h))
	cur := <-got
	time.Sleep(100 * time.Millisecond) // room for a herd to show
	assert.Equal(t, int32(1), woken.Load(), "one permit freed: one waiter woken")
	assert.Len(t, got, 0)
	// Hand on, one by one, to the end.
	for range waiters - 1 {
		require.NoError(t, cur.s.Release(cur.h))
		select {
		case cur = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the next waiter was not served")
		}
	}
	require.NoError(t, cur.s.Release(cur.h))
}
