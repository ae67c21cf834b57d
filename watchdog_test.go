package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock"
)

// waitTicks blocks until the watchdog has run n whole ticks that started
// after the call (ticks are counted when they finish; one may be under way).
func waitTicks(t *testing.T, c *relock.Client, n int64) {
	t.Helper()
	t0, _, _ := c.WatchdogStats()
	require.Eventually(t, func() bool {
		t1, _, _ := c.WatchdogStats()
		return t1 >= t0+n+1
	}, 30*time.Second, time.Millisecond)
}

// watchdogLease is short on miniredis, whose clock the test moves, and long
// enough on a real server that a loaded machine still renews in time.
func (b *backend) watchdogLease() time.Duration {
	if b.real() {
		return time.Second
	}
	return 300 * time.Millisecond
}

func TestWatchdogKeepsALockAcrossSeveralLeases(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		lease := b.watchdogLease()
		c := b.newClient(t, relock.WithWatchdogLease(lease))
		l := c.Lock("long")
		ctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		owner := ownerField(t, c, ctx)

		// Six half-leases pass (three whole leases); after each, a renewal
		// resets the lease.
		for range 6 {
			b.expire(lease / 2)
			waitTicks(t, c, 1)
			require.Equal(t, map[string]string{owner: "1"}, owners(t, b.rdb, l.Key()))
			ttl := pttl(t, b.rdb, l.Key())
			assert.Greater(t, ttl, lease/3, "the lease was refreshed")
		}
		require.NoError(t, ctx.Err())
		require.NoError(t, l.Unlock(ctx))
	})
}

func TestWatchdogTellsTheHolderWhenTheKeyIsDeleted(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		lease := b.watchdogLease()
		c := b.newClient(t, relock.WithWatchdogLease(lease))
		l := c.Lock("deleted")
		ctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		waitTicks(t, c, 1)

		require.NoError(t, b.newConn(t).Del(context.Background(), l.Key()).Err())
		before, _, _ := c.WatchdogStats()
		<-ctx.Done()
		after, _, _ := c.WatchdogStats()
		assert.LessOrEqual(t, after-before, int64(1), "told within one renewal interval")
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrLockLost)
		assert.Equal(t, 0, c.WatchedHolds(), "a lost hold is not renewed any more")
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrLockLost)
	})
}

func TestWatchdogTellsTheHolderWhenSomeoneElseTookTheLock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		lease := b.watchdogLease()
		c := b.newClient(t, relock.WithWatchdogLease(lease))
		l := c.Lock("stolen")
		ctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		other := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = other.Close() })
		_, err = other.Lock("stolen").ForceUnlock(context.Background())
		require.NoError(t, err)
		theirs, err := other.Lock("stolen").Lock(context.Background())
		require.NoError(t, err)

		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrLockLost)
		// The renewal did not extend the new owner's lease on our behalf,
		// nor disturb their hold.
		assert.Equal(t, map[string]string{ownerField(t, other, theirs): "1"}, owners(t, b.rdb, l.Key()))
		require.NoError(t, other.Lock("stolen").Unlock(theirs))
	})
}

func TestLeasedLockIsNeverRenewed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		lease := b.watchdogLease()
		c := b.newClient(t, relock.WithWatchdogLease(lease))
		watched, err := c.Lock("watched").Lock(context.Background()) // keeps the watchdog ticking
		require.NoError(t, err)
		l := c.Lock("leased")
		ctx, err := l.TryLock(context.Background(), 0, 6*lease)
		require.NoError(t, err)
		assert.Equal(t, 1, c.WatchedHolds())
		first := pttl(t, b.rdb, l.Key())
		for range 2 { // the watched lock is renewed meanwhile; the leased one is not
			b.expire(lease / 2)
			waitTicks(t, c, 1)
		}
		assert.Less(t, pttl(t, b.rdb, l.Key()), first-lease+lease/5, "the lease only runs down")
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, c.Lock("watched").Unlock(watched))
	})
}

func TestReentrantHoldIsRenewedUntilTheLastUnlock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		lease := b.watchdogLease()
		c := b.newClient(t, relock.WithWatchdogLease(lease))
		l := c.Lock("nested")
		outer, err := l.Lock(context.Background())
		require.NoError(t, err)
		inner, err := l.Lock(outer)
		require.NoError(t, err)
		assert.Equal(t, 1, c.WatchedHolds(), "one renewal entry per hold, whatever its count")
		require.NoError(t, l.Unlock(inner))
		assert.Equal(t, 1, c.WatchedHolds())
		b.expire(lease * 2 / 3)
		waitTicks(t, c, 1)
		assert.Greater(t, pttl(t, b.rdb, l.Key()), lease/3, "still renewed after the inner Unlock")
		require.NoError(t, l.Unlock(outer))
		assert.Equal(t, 0, c.WatchedHolds())
		// No zombie renewal: ticks after the Unlock never bring the key back.
		c.WatchdogTick()
		assert.Empty(t, hgetall(t, b.rdb, l.Key()))
	})
}

// A server that stops answering for longer than the lease: the watchdog cannot
// renew, and the holder is told when the lease it last renewed runs out.
func TestWatchdogReportsLossWhenTheServerHangs(t *testing.T) {
	b := newReal(t)
	const lease = 600 * time.Millisecond
	c := b.newClient(t, relock.WithWatchdogLease(lease))
	l := c.Lock("paused")
	ctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	waitTicks(t, c, 1)

	b.srv.Pause()
	t.Cleanup(b.srv.Resume)
	paused := time.Now()
	<-ctx.Done()
	assert.ErrorIs(t, context.Cause(ctx), relock.ErrLockLost)
	// Told no later than about one lease after the pause began (the last
	// renewal happened before it), and not before the lease could have run out.
	elapsed := time.Since(paused)
	assert.Less(t, elapsed, 3*lease, "told late: %v", elapsed)
	b.srv.Resume()
}

// A server that hangs for less than the lease: renewals fail, are retried,
// and the hold survives.
func TestWatchdogRetriesTransientFailures(t *testing.T) {
	b := newReal(t)
	const lease = 1500 * time.Millisecond
	c := b.newClient(t, relock.WithWatchdogLease(lease))
	l := c.Lock("blip")
	ctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	waitTicks(t, c, 1)
	_, rt0, _ := c.WatchdogStats()

	b.srv.Pause()
	time.Sleep(lease / 3) // a hang of one renewal interval, by definition a span of time
	b.srv.Resume()
	waitTicks(t, c, 2)
	_, rt1, _ := c.WatchdogStats()
	assert.Greater(t, rt1-rt0, int64(1), "the failed renewal was retried")
	require.NoError(t, ctx.Err(), "a transient failure does not lose the lock")
	assert.Greater(t, pttl(t, b.rdb, l.Key()), lease/2)
	require.NoError(t, l.Unlock(ctx))
}

func TestCloseLeavesNoGoroutineBehind(t *testing.T) {
	b := newReal(t)
	rdb := b.newConn(t)
	require.NoError(t, rdb.Ping(context.Background()).Err())
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	c := relock.New(rdb, relock.WithWatchdogLease(300*time.Millisecond))
	l := c.Lock("leak")
	ctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	leased, err := c.Lock("leak2").TryLock(context.Background(), 0, time.Minute)
	require.NoError(t, err)
	waiting := make(chan error)
	go func() {
		_, err := l.Lock(context.Background()) // another owner: waits on pub/sub
		waiting <- err
	}()
	require.Eventually(t, func() bool { return c.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
	waitTicks(t, c, 1)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-waiting, relock.ErrClientClosed)
	assert.ErrorIs(t, context.Cause(ctx), relock.ErrClientClosed)
	assert.ErrorIs(t, context.Cause(leased), relock.ErrClientClosed)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, c.Lock("leak2").Unlock(leased))
}
