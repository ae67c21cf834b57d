package bench

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// The seed lock is Redisson's: one hash per lock, a count per owner, and a
// release that deletes the hash only when the owner's count reaches 0.
func TestSeedLockCountsReentries(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	l, err := seedLibrary().New(srv.Addr(), "relockbench:t:", nil)
	require.NoError(t, err)
	defer l.Close()

	u, err := l.Lock(ctx, "a")
	require.NoError(t, err)
	_, err = l.(Reentrant).LockAgain(ctx, u)
	require.NoError(t, err)
	h := u.(seedHold)
	assert.Equal(t, "2", rdb.HGet(ctx, h.key, h.owner).Val())
	ttl := rdb.PTTL(ctx, h.key).Val()
	assert.Greater(t, ttl, floorLease-5*time.Second, "the acquire sets the lease")

	require.NoError(t, u.Unlock(ctx))
	assert.Equal(t, "1", rdb.HGet(ctx, h.key, h.owner).Val(), "the first release leaves the outer hold")
	require.NoError(t, u.Unlock(ctx))
	assert.Zero(t, rdb.Exists(ctx, h.key).Val(), "the last release deletes the lock")
	assert.ErrorIs(t, u.Unlock(ctx), errClosed, "a release of nothing says so")
}

// A waiter must be woken by the release's message, not by the holder's
// 30 s lease running out (the only other way a waiter retries).
func TestSeedWaiterWakesOnRelease(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	var lockers [2]Locker
	for i := range lockers {
		l, err := seedLibrary().New(srv.Addr(), "relockbench:t:", nil)
		require.NoError(t, err)
		defer l.Close()
		lockers[i] = l
	}
	held, err := lockers[0].Lock(ctx, "a")
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		u, err := lockers[1].Lock(ctx, "a")
		if err == nil {
			err = u.Unlock(ctx)
		}
		got <- err
	}()
	channel := seedChannelOf("relockbench:t:a")
	require.Eventually(t, func() bool {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel] == 1
	}, 5*time.Second, time.Millisecond, "the waiter subscribes to the lock's channel")

	start := time.Now()
	require.NoError(t, held.Unlock(ctx))
	require.NoError(t, <-got)
	assert.Less(t, time.Since(start), 2*time.Second, "woken by the release's message, not by the lease")
	assert.Eventually(t, func() bool {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel] == 0
	}, 5*time.Second, time.Millisecond, "the waiter unsubscribes once it holds the lock")
}
