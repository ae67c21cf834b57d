package relock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// A TrySetCount or a Delete whose reply is lost is resent by go-redis, and
// returns what its first run returned, not "closed already" or "nothing
// to delete" for the work its first run did.
func TestCountDownLatchReplayedSetAndDeleteReturnTheirFirstResult(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	d := redistest.NewReplyDropper()
	rdb.AddHook(d)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	warm := c.CountDownLatch("warm") // loads the scripts: the dropped command is the EVALSHA
	_, err := warm.TrySetCount(ctx, 1)
	require.NoError(t, err)
	_, err = warm.Delete(ctx)
	require.NoError(t, err)

	l := c.CountDownLatch("replay")
	d.Arm("evalsha", 1)
	set, err := l.TrySetCount(ctx, 3)
	require.NoError(t, err)
	require.EqualValues(t, 1, d.Dropped(), "the reply was lost and the request resent")
	assert.True(t, set, "the resent TrySetCount set the latch")
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n)

	d.Arm("evalsha", 1)
	deleted, err := l.Delete(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, d.Dropped())
	assert.True(t, deleted, "the resent Delete deleted the latch")
	n, err = l.Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	// A second TrySetCount (a new request) still sees the latch closed.
	_, err = l.TrySetCount(ctx, 2)
	require.NoError(t, err)
	set, err = l.TrySetCount(ctx, 5)
	require.NoError(t, err)
	assert.False(t, set)
	deleted, err = c.CountDownLatch("never").Delete(ctx)
	require.NoError(t, err)
	assert.False(t, deleted, "a latch never set is not deleted")
}

// startWaiter runs l.Wait(ctx) and returns when its result is in: its
// error and when it returned.
func startWaiter(ctx context.Context, l *relock.CountDownLatch) <-chan waited {
	ch := make(chan waited, 1)
	go func() {
		err := l.Wait(ctx)
		ch <- waited{err, time.Now()}
	}()
	return ch
}

type waited struct {
	err error
	at  time.Time
}

// waitSubscribed waits until n clients listen on the latch's channel.
func waitSubscribed(t *testing.T, rdb *redis.Client, channel string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		m, err := rdb.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && m[channel] == n
	}, 10*time.Second, 5*time.Millisecond, "the waiters listen")
}

// Delete fails the waiters that saw the latch closed, at once, with
// ErrNotObtained and not ErrLockLost; a Wait that starts after it returns
// at once; only the mark is left, and it expires. The waiter must not read
// the deleted latch as open.
func TestCountDownLatchDeleteFailsItsWaiters(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	var asleep atomic.Int32 // waiters that saw the latch closed and sleep
	c := relock.New(rdb, relock.WithWatchdogLease(600*time.Millisecond), relock.WithObserver(&relock.Observer{
		WaitStarted: func(context.Context, relock.LockInfo) { asleep.Add(1) },
	}))
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	l := c.CountDownLatch("deleted")
	_, err := l.TrySetCount(ctx, 2)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	waiters := []<-chan waited{startWaiter(wctx, l), startWaiter(wctx, l)}
	waitSubscribed(t, rdb, "relock:{deleted}:latch:ch", 1)
	require.Eventually(t, func() bool { return asleep.Load() == 2 }, 5*time.Second, time.Millisecond)
	deleted, err := l.Delete(ctx)
	require.NoError(t, err)
	require.True(t, deleted)
	at := time.Now()
	for _, w := range waiters {
		r := <-w
		require.ErrorIs(t, r.err, relock.ErrNotObtained)
		assert.NotErrorIs(t, r.err, relock.ErrLockLost, "deleted, not lost")
		assert.NotErrorIs(t, r.err, context.DeadlineExceeded, "told by the Delete")
		assert.Less(t, r.at.Sub(at), time.Second, "woken by the Delete")
	}
	require.NoError(t, l.Wait(ctx), "a Wait that starts after Delete: the latch is not closed")
	assert.Empty(t, keysLeft(t, rdb), "only the mark is left, and it expires")
	set, err := l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	assert.True(t, set, "a deleted latch can be set again")
}

// Three Clients count a latch of 400 down; Redis restarts without its data
// after 170. The waiter never returns nil: it fails with ErrNotObtained and
// ErrLockLost within a few seconds of Redis coming back, also when a
// counter sets the latch again after the restart: it reads the forgotten
// latch neither as open nor as the new one.
func TestCountDownLatchLostByARestartFailsItsWaiter(t *testing.T) {
	for _, setAgain := range []bool{false, true} {
		t.Run(fmt.Sprintf("setAgain=%v", setAgain), func(t *testing.T) {
			srv := redistest.Start(t)
			newClient := func() *relock.Client {
				rdb := srv.Client()
				c := relock.New(rdb, relock.WithLogger(quietLogger()))
				t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
				return c
			}
			ctx := context.Background()
			l := newClient().CountDownLatch("batch")
			_, err := l.TrySetCount(ctx, 400)
			require.NoError(t, err)
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			w := startWaiter(wctx, l)
			waitSubscribed(t, srv.Client(), "relock:{batch}:latch:ch", 1)
			counters := []*relock.Client{newClient(), newClient(), newClient()}
			countDown := func(n int) {
				var wg sync.WaitGroup
				for i, c := range counters {
					wg.Go(func() {
						for j := i; j < n; j += len(counters) {
							_ = c.CountDownLatch("batch").CountDown(ctx) // errors while Redis restarts: lost counts
						}
					})
				}
				wg.Wait()
			}
			countDown(170)
			n, err := l.Count(ctx)
			require.NoError(t, err)
			require.Equal(t, 230, n)
			srv.Restart()
			back := time.Now()
			if setAgain {
				_, err = counters[0].CountDownLatch("batch").TrySetCount(ctx, 230)
				require.NoError(t, err)
			}
			go countDown(230)
			select {
			case r := <-w:
				require.ErrorIs(t, r.err, relock.ErrNotObtained, "the latch never opened")
				require.ErrorIs(t, r.err, relock.ErrLockLost)
				t.Logf("the waiter was told %v after Redis came back", r.at.Sub(back))
				assert.Less(t, r.at.Sub(back), 5*time.Second, "told within a few seconds of Redis coming back")
			case <-time.After(15 * time.Second):
				t.Fatal("the waiter was never told that Redis lost the latch")
			}
		})
	}
}
