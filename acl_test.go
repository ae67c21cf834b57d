package relock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// leastPrivilege is the ACL the README recommends for a relock user with the
// default key prefix: the script commands, what the scripts call, the
// queries (EXISTS, HGET, PTTL), pub/sub on relock's channels, PING for the
// subscriber's health checks and WAIT for WithReplicas; keys and channels
// under relock: only.
var leastPrivilege = []string{
	"on", ">s3cret", "resetkeys", "resetchannels", "~relock:*", "&relock:*", "-@all",
	"+evalsha", "+eval", // the scripts
	"+hget", "+hset", "+hexists", "+hincrby", "+hdel", "+hgetall", "+exists", "+pttl", "+pexpire", "+del", "+get", "+set", "+incr", // called by the scripts
	"+time", "+zadd", "+zrem", "+zremrangebyscore", "+zscore", "+zrange", "+zrangebyscore", "+zcard", "+rpush", "+lpop", "+lindex", "+lrem", // FairLock and RWLock scripts
	"+publish", "+spublish", "+subscribe", "+unsubscribe", "+ssubscribe", "+sunsubscribe", "+ping", // waiting
	"+wait", // WithReplicas
}

func setUser(t *testing.T, admin *redis.Client, name string, rules []string) {
	t.Helper()
	args := []any{"acl", "setuser", name}
	for _, r := range rules {
		args = append(args, r)
	}
	require.NoError(t, admin.Do(context.Background(), args...).Err())
}

func TestLeastPrivilegeACL(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	admin := srv.Client()
	setUser(t, admin, "relock", leastPrivilege)
	asUser := func(user string) *redis.Client {
		return srv.Client(func(o *redis.Options) { o.Username, o.Password = user, "s3cret" })
	}
	ctx := context.Background()

	eachKind(t, func(t *testing.T, k lockKind) {
		const lease = 600 * time.Millisecond
		holder := relock.New(asUser("relock"), relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = holder.Close() })
		waiter := relock.New(asUser("relock"), relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = waiter.Close() })

		l := k.open(holder, "acl")
		hctx, err := l.Lock(ctx)
		require.NoError(t, err)
		inner, err := l.Lock(hctx)
		require.NoError(t, err)
		got := lockAsync(k.open(waiter, "acl"))
		require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
		waitTicks(t, holder, 4) // renewals past the lease
		require.NoError(t, hctx.Err())
		assert.Equal(t, map[string]string{ownerField(t, holder, hctx): "2"}, k.state(t, admin, k.keyOf(holder, "acl")))
		require.NoError(t, l.Unlock(inner))
		require.NoError(t, l.Unlock(hctx))
		wctx := mustGet(t, got, 5*time.Second)
		require.NoError(t, k.open(waiter, "acl").Unlock(wctx))
	})

	t.Run("Queries", func(t *testing.T) {
		c := relock.New(asUser("relock"))
		t.Cleanup(func() { _ = c.Close() })
		l := c.Lock("acl-queries")
		hctx, err := l.Lock(ctx)
		require.NoError(t, err)
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		n, err := l.HoldCount(hctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		assert.Positive(t, ttl)
		freed, err := l.ForceUnlock(ctx)
		require.NoError(t, err)
		assert.True(t, freed)
	})

	t.Run("NothingElse", func(t *testing.T) {
		rdb := asUser("relock")
		require.NoError(t, admin.Set(ctx, "other", "x", 0).Err())
		assert.ErrorContains(t, rdb.Get(ctx, "other").Err(), "NOPERM")
		assert.ErrorContains(t, rdb.FlushAll(ctx).Err(), "NOPERM")
		assert.ErrorContains(t, rdb.Publish(ctx, "other", "x").Err(), "NOPERM")
		// A script cannot reach beyond the key pattern either.
		err := rdb.Eval(ctx, "return redis.call('get', KEYS[1])", []string{"other"}).Err()
		assert.ErrorContains(t, err, "NOPERM")
	})

	// With a permission missing, the server's refusal reaches the caller
	// wrapped ("relock: acquire: ..."), and nothing is written.
	t.Run("MissingPermissionIsReported", func(t *testing.T) {
		rules := append(append([]string{}, leastPrivilege...), "-hset")
		setUser(t, admin, "nohset", rules)
		c := relock.New(asUser("nohset"))
		t.Cleanup(func() { _ = c.Close() })
		l := c.Lock("acl-nohset")
		_, err := l.Lock(ctx)
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(err.Error(), "relock: acquire: "), err.Error())
		assert.ErrorContains(t, err, "can't run this command")
		var reply redis.Error
		assert.ErrorAs(t, err, &reply, "the server's error stays reachable")
		assert.Empty(t, hgetall(t, admin, l.Key()))
	})
}

// Another client — another process that knows or guesses the lock name, or
// even an owner id — cannot release or renew a hold it does not own.
func TestForeignClientCannotReleaseOrRenew(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		const lease = 2 * time.Second
		owner := b.newClient(t)
		hctx, err := owner.Lock("secret").TryLock(ctx, 0, lease)
		require.NoError(t, err)
		key := owner.Lock("secret").Key()
		before := hgetall(t, b.rdb, key)

		intruder := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = intruder.Close() })
		l := intruder.Lock("secret")
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrNotHeld)
		assert.ErrorIs(t, l.Unlock(hctx), relock.ErrNotHeld, "the owner's context means nothing to another client")
		id, _ := relock.OwnerOf(hctx)
		for _, guess := range []string{id, "1", owner.ID(), owner.ID() + ":" + id + "x"} {
			gctx, err := relock.WithOwner(ctx, guess)
			require.NoError(t, err)
			assert.ErrorIs(t, l.Unlock(gctx), relock.ErrNotHeld)
			_, err = l.TryLock(gctx, 0, 0)
			assert.ErrorIs(t, err, relock.ErrNotObtained, "guess %q", guess)
		}
		assert.Equal(t, before, hgetall(t, b.rdb, key))
		if b.real() {
			assert.LessOrEqual(t, pttl(t, b.rdb, key), lease, "nobody renewed the owner's lease")
		}
		require.NoError(t, owner.Lock("secret").Unlock(hctx))
	})
}
