package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/redistest"
)

// A SpinLock works for a user that may not use pub/sub at all: a waiter in
// another Client polls, subscribes to nothing, and takes the lock within a
// few polls of its release, long before the holder's lease would have run
// out. Inspect, ListLocks and ForceUnlock know it from its row alone.
func TestSpinLockWithoutPubSub(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	setUser(t, admin, "nopubsub", []string{"on", ">s3cret", "~*", "+@all", "-@pubsub"})
	asUser := func() *redis.Client {
		return srv.Client(func(o *redis.Options) { o.Username, o.Password = "nopubsub", "s3cret" })
	}
	ctx := context.Background()
	const lease = 10 * time.Second // a wait that fell back to the lease would fail the bound below
	holder := relock.New(asUser(), relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = holder.Close() })
	waiting := make(chan relock.LockInfo, 1)
	waiter := relock.New(asUser(), relock.WithWatchdogLease(lease), relock.WithObserver(&relock.Observer{
		WaitStarted: func(_ context.Context, info relock.LockInfo) { waiting <- info },
	}))
	t.Cleanup(func() { _ = waiter.Close() })
	const name = "spin"

	hctx, err := holder.SpinLock(name).Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		wctx, err := waiter.SpinLock(name).TryLock(ctx, 5*time.Second, 0)
		if err == nil {
			err = waiter.SpinLock(name).Unlock(wctx)
		}
		got <- err
	}()
	info := <-waiting
	assert.Equal(t, relock.LockInfo{Name: name, Kind: relock.KindSpinLock}, info)
	assert.Equal(t, 0, waiter.SubscribedChannels(), "a SpinLock's waiter subscribes to nothing")

	st, err := holder.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, []inspect.Kind{inspect.KindSpinLock}, st.Kinds())
	require.NotNil(t, st.SpinLock)
	assert.Equal(t, holder.SpinLock(name).Key(), st.SpinLock.Key)
	require.Len(t, st.SpinLock.Holders, 1)
	list, err := holder.ListLocks(ctx, name)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, inspect.KindSpinLock, list[0].Kind)

	released := time.Now()
	require.NoError(t, holder.SpinLock(name).Unlock(hctx))
	select {
	case err := <-got:
		require.NoError(t, err)
		assert.Less(t, time.Since(released), time.Second, "the waiter polls every 20 ms")
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter did not take the released SpinLock")
	}

	// ForceUnlock frees a hold whoever has it; the holder learns it.
	hctx, err = holder.SpinLock(name).Lock(ctx)
	require.NoError(t, err)
	ok, err := waiter.SpinLock(name).ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.ErrorIs(t, holder.SpinLock(name).Unlock(hctx), relock.ErrLockLost)

	// Do holds it around fn and releases it after.
	require.NoError(t, waiter.SpinLock(name).Do(ctx, func(ctx context.Context) error {
		held, err := holder.SpinLock(name).IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, held)
		return nil
	}))
	requireOnlyExpiringLeftovers(t, admin)
}

// A SpinLock is a lock of its own, not a way to wait for the Lock of the same
// name: each has its own key, so two owners hold both at once, and Inspect
// shows the name held as both kinds. (Only a RedLock and a Lock of one name
// share a key, on each master.)
func TestSpinLockAndLockOfOneNameDoNotExclude(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	a, b := relock.New(rdb), relock.New(srv.Client())
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ctx := context.Background()
	const name = "both"

	lctx, err := a.Lock(name).Lock(ctx)
	require.NoError(t, err)
	sctx, err := b.SpinLock(name).TryLock(ctx, 0, 0)
	require.NoError(t, err, "the SpinLock is free while the Lock is held")
	assert.NotEqual(t, a.Lock(name).Key(), b.SpinLock(name).Key())
	assert.Equal(t, map[string]string{ownerField(t, a, lctx): "1"}, owners(t, rdb, a.Lock(name).Key()))
	assert.Equal(t, map[string]string{ownerField(t, b, sctx): "1"}, owners(t, rdb, b.SpinLock(name).Key()))
	st, err := a.Inspect(ctx, name)
	require.NoError(t, err)
	assert.ElementsMatch(t, []inspect.Kind{inspect.KindLock, inspect.KindSpinLock}, st.Kinds())

	require.NoError(t, b.SpinLock(name).Unlock(sctx))
	require.NoError(t, a.Lock(name).Unlock(lctx))
}
