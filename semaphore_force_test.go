package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// ForceRelease frees every permit whoever holds it: this Client's holds end
// at once, another process's at its next renewal, and the permits go to the
// queued waiter — here one of this very Client, whose hold stays.
func TestSemaphoreForceReleaseFreesEveryHoldAndTellsTheHolders(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	ev := &events{}
	c := relock.New(srv.Client(), relock.WithLogger(quietLogger()), relock.WithObserver(ev.observer()))
	t.Cleanup(func() { _ = c.Close() })
	other := relock.New(srv.Client(), relock.WithWatchdogLease(900*time.Millisecond), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = other.Close() })
	s := c.Semaphore("force", 3)
	mine, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	theirs, err := other.Semaphore("force", 3).Acquire(ctx, 2)
	require.NoError(t, err)
	type result struct {
		ctx context.Context
		err error
	}
	got := make(chan result, 1)
	go func() {
		wctx, err := s.Acquire(ctx, 3)
		got <- result{wctx, err}
	}()
	require.Eventually(t, func() bool { st, err := s.State(ctx); return err == nil && st.Waiters == 1 }, 5*time.Second, time.Millisecond)

	freed, err := s.ForceRelease(ctx)
	require.NoError(t, err)
	assert.True(t, freed)
	require.Error(t, mine.Err(), "this Client's forced hold ends at once")
	assert.ErrorIs(t, context.Cause(mine), relock.ErrLockLost)
	lost := ev.lostEvents()
	require.Len(t, lost, 1)
	assert.Equal(t, relock.LossForceUnlocked, lost[0].Reason)
	assert.Equal(t, relock.KindSemaphore, lost[0].Kind)
	select {
	case <-theirs.Done():
		assert.ErrorIs(t, context.Cause(theirs), relock.ErrLockLost)
	case <-time.After(5 * time.Second):
		t.Fatal("the other process's holder did not learn it lost its permits")
	}
	var w result
	select {
	case w = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the queued waiter was not handed the permits")
	}
	require.NoError(t, w.err)
	require.NoError(t, context.Cause(w.ctx), "the hold handed over by the force release is live")
	st, err := s.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, relock.SemaphoreState{Permits: 3, Used: 3, Holds: 1}, st)
	assert.ErrorIs(t, s.Release(mine), relock.ErrLockLost)
	assert.ErrorIs(t, other.Semaphore("force", 3).Release(theirs), relock.ErrLockLost)

	require.NoError(t, s.Release(w.ctx))
	freed, err = other.Semaphore("force", 1).ForceRelease(ctx) // the capacity plays no part
	require.NoError(t, err)
	assert.False(t, freed, "nothing left to free")
	n, err := srv.Client().Exists(ctx, s.Key()).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

// ForceRelease returns by the caller's deadline when Redis hangs; the
// release runs once Redis answers and this Client's hold then ends. Bad
// input fails cleanly.
func TestSemaphoreForceReleaseHonoursItsContext(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	s := c.Semaphore("q", 2)
	hctx, err := s.Acquire(context.Background(), 1)
	require.NoError(t, err)

	_, err = s.ForceRelease(nil) //nolint:staticcheck // a nil context is the bad input under test
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	_, err = c.Semaphore("", 2).ForceRelease(context.Background())
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	require.NoError(t, context.Cause(hctx), "bad input changes nothing")

	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	start := time.Now()
	_, err = s.ForceRelease(ctx)
	took := time.Since(start)
	assert.Less(t, took, callBound+boundSlack)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, relock.ErrUnavailable)
	srv.Resume()
	resumed = true
	require.Eventually(t, func() bool { return hctx.Err() != nil }, 10*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
	st, err := s.State(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.Holds)
}

// The README's least-privilege ACL is enough for ForceRelease.
func TestSemaphoreForceReleaseUnderTheLeastPrivilegeACL(t *testing.T) {
	srv := redistest.Start(t)
	setUser(t, srv.Client(), "relock", leastPrivilege)
	c := relock.New(srv.Client(func(o *redis.Options) { o.Username, o.Password = "relock", "s3cret" }))
	t.Cleanup(func() { _ = c.Close() })
	s := c.Semaphore("acl", 2)
	hctx, err := s.Acquire(context.Background(), 2)
	require.NoError(t, err)
	freed, err := s.ForceRelease(context.Background())
	require.NoError(t, err)
	assert.True(t, freed)
	assert.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
}
