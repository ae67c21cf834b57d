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

// TestSentinel runs on one Sentinel-managed deployment (a primary, one
// replica, three Sentinels) through go-redis's failover client, shared by
// the subtests; the last one kills the primary.
func TestSentinel(t *testing.T) {
	d := redistest.StartSentinel(t, 1, 3)
	replica := d.Replicas[0].Client()

	eachKind(t, func(t *testing.T, k lockKind) {
		t.Run("ReplicatedBeforeLockReturns", func(t *testing.T) {
			c := relock.New(d.Client(), relock.WithReplicas(1, time.Second))
			t.Cleanup(func() { _ = c.Close() })
			l := k.open(c, "replicated")
			warm, err := l.Lock(context.Background()) // loads the script (NOSCRIPT costs one more WAIT)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(warm))
			before, err := redistest.CommandCalls(context.Background(), d.Primary.Client())
			require.NoError(t, err)
			hctx, err := l.Lock(context.Background())
			require.NoError(t, err)
			after, err := redistest.CommandCalls(context.Background(), d.Primary.Client())
			require.NoError(t, err)
			assert.Equal(t, before["wait"]+1, after["wait"], "one WAIT per acquire")
			// No waiting here: WAIT made Lock return only after the replica
			// had the hold.
			assert.Equal(t, map[string]string{ownerField(t, c, hctx): "1"}, k.state(t, replica, k.keyOf(c, "replicated")))
			require.NoError(t, l.Unlock(hctx))
		})

		t.Run("TooFewReplicas", func(t *testing.T) {
			c := relock.New(d.Client(), relock.WithReplicas(2, 100*time.Millisecond))
			t.Cleanup(func() { _ = c.Close() })
			l := k.open(c, "underreplicated")
			_, err := l.Lock(context.Background())
			require.ErrorIs(t, err, relock.ErrNotReplicated)
			require.ErrorIs(t, err, relock.ErrNotObtained)
			assert.Empty(t, k.state(t, d.Client(), k.keyOf(c, "underreplicated")), "the unreplicated grant was taken back")
			assert.Equal(t, 0, c.TrackedHolds())
		})
	})

	t.Run("Failover", func(t *testing.T) {
		for _, k := range exclusiveKinds {
			t.Run(k.name, func(t *testing.T) { testSentinelFailover(t, d, k) })
			break // the deployment has one primary to kill
		}
	})
}

// After the primary is killed and Sentinel promotes the replica: a hold
// replicated before Lock returned keeps being renewed, the waiter is woken by
// its release, and new locks are granted by the new primary.
func testSentinelFailover(t *testing.T, d *redistest.Sentinel, k lockKind) {
	ctx := context.Background()
	// Longer than a failover takes on a busy machine (2-6 s here): the hold
	// must outlive the time nobody can renew it.
	const lease = 15 * time.Second
	holder := relock.New(d.Client(), relock.WithWatchdogLease(lease), relock.WithReplicas(1, time.Second))
	t.Cleanup(func() { _ = holder.Close() })
	waiter := relock.New(d.Client(), relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = waiter.Close() })
	check := newBelievers(t)
	const name = "failover"

	l := k.open(holder, name)
	hctx, err := l.Lock(ctx)
	require.NoError(t, err)
	check.enter("holder", hctx, token(t, l, hctx))
	got := lockAsync(k.open(waiter, name))
	require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)

	old := d.Primary
	old.Kill()
	promoted, err := d.WaitFailover(old, 20*time.Second)
	require.NoError(t, err)
	rdb := promoted.Client()

	// New locks are granted, by the new primary.
	fresh := relock.New(d.Client())
	t.Cleanup(func() { _ = fresh.Close() })
	nctx, err := k.open(fresh, "after-failover").Lock(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{ownerField(t, fresh, nctx): "1"}, k.state(t, rdb, k.keyOf(fresh, "after-failover")))
	require.NoError(t, k.open(fresh, "after-failover").Unlock(nctx))

	// The replicated hold survived, and the watchdog renews it there.
	key := k.keyOf(holder, name)
	assert.Equal(t, map[string]string{ownerField(t, holder, hctx): "1"}, k.state(t, rdb, key))
	// The failover itself may already have triggered a renewal (a dropped
	// connection makes the Client check every hold): shorten the lease on
	// the promoted primary, so that only a renewal there can restore it.
	require.NoError(t, rdb.PExpire(ctx, key, 5*time.Second).Err())
	require.Eventually(t, func() bool {
		holder.WatchdogTick() // rather than wait lease/3 for the next one
		return pttl(t, rdb, key) > lease-2*time.Second
	}, 10*time.Second, 50*time.Millisecond, "the watchdog renews on the promoted primary")
	require.NoError(t, hctx.Err())
	mustNotGet(t, got)

	// Its release wakes the waiter, whose subscriber followed the failover.
	check.exit(hctx)
	require.NoError(t, l.Unlock(hctx))
	wctx := mustGet(t, got, 5*time.Second)
	check.enter("waiter", wctx, token(t, k.open(waiter, name), wctx))
	require.NoError(t, k.open(waiter, name).Unlock(wctx))
}

// WithReplicas where the server cannot satisfy or does not accept WAIT: the
// error says so, and the grant is taken back.
func TestReplicasOptionErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t, relock.WithReplicas(1, 50*time.Millisecond))
		l := c.Lock("lonely")
		_, err := l.Lock(context.Background())
		require.ErrorIs(t, err, relock.ErrNotReplicated)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		assert.Empty(t, hgetall(t, b.rdb, l.Key()))

		// Busy: the WAIT after an attempt that wrote nothing costs nothing,
		// and the lock stays with its holder.
		plain := b.newClient(t)
		hctx, err := plain.Lock("lonely").Lock(context.Background())
		require.NoError(t, err)
		_, err = l.TryLock(context.Background(), 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.NotErrorIs(t, err, relock.ErrNotReplicated)
		assert.Equal(t, map[string]string{ownerField(t, plain, hctx): "1"}, owners(t, b.rdb, l.Key()))
		require.NoError(t, plain.Lock("lonely").Unlock(hctx))
	})
	bad := []relock.Option{
		relock.WithReplicas(-1, time.Second),
		relock.WithReplicas(1, 0),
		relock.WithReplicas(1, 10*time.Second), // longer than go-redis's 3 s ReadTimeout
	}
	b := newMini(t)
	for _, opt := range bad {
		_, err := relock.New(b.rdb, opt).Lock("x").Lock(context.Background())
		assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	}
	assert.Empty(t, allKeys(t, b.rdb))
}
