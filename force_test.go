package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// forceKind is one kind of lock with a force release, as the tests of
// guarded and told force releases drive it.
type forceKind struct {
	name   string
	tokens bool // its holds carry fencing tokens
	hold   func(c *relock.Client, ctx context.Context) (context.Context, error)
	token  func(c *relock.Client, hctx context.Context) (int64, error)
	force  func(c *relock.Client, ctx context.Context, g relock.ForceGuard) (bool, error)
}

func forceKinds() []forceKind {
	const name = "forced"
	return []forceKind{
		{"Lock", true, func(c *relock.Client, ctx context.Context) (context.Context, error) { return c.Lock(name).Lock(ctx) },
			func(c *relock.Client, h context.Context) (int64, error) { return c.Lock(name).Token(h) },
			func(c *relock.Client, ctx context.Context, g relock.ForceGuard) (bool, error) {
				if g == (relock.ForceGuard{}) {
					return c.Lock(name).ForceUnlock(ctx)
				}
				return c.Lock(name).ForceUnlockIf(ctx, g)
			}},
		{"FairLock", true, func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.FairLock(name).Lock(ctx)
		},
			func(c *relock.Client, h context.Context) (int64, error) { return c.FairLock(name).Token(h) },
			func(c *relock.Client, ctx context.Context, g relock.ForceGuard) (bool, error) {
				if g == (relock.ForceGuard{}) {
					return c.FairLock(name).ForceUnlock(ctx)
				}
				return c.FairLock(name).ForceUnlockIf(ctx, g)
			}},
		{"SpinLock", true, func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.SpinLock(name).Lock(ctx)
		},
			func(c *relock.Client, h context.Context) (int64, error) { return c.SpinLock(name).Token(h) },
			func(c *relock.Client, ctx context.Context, g relock.ForceGuard) (bool, error) {
				if g == (relock.ForceGuard{}) {
					return c.SpinLock(name).ForceUnlock(ctx)
				}
				return c.SpinLock(name).ForceUnlockIf(ctx, g)
			}},
		{"WriteLock", true, func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.RWLock(name).WriteLock().Lock(ctx)
		},
			func(c *relock.Client, h context.Context) (int64, error) { return c.RWLock(name).WriteLock().Token(h) },
			func(c *relock.Client, ctx context.Context, g relock.ForceGuard) (bool, error) {
				if g == (relock.ForceGuard{}) {
					return c.RWLock(name).WriteLock().ForceUnlock(ctx)
				}
				return c.RWLock(name).WriteLock().ForceUnlockIf(ctx, g)
			}},
		{"ReadLock", false, func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.RWLock(name).ReadLock().Lock(ctx)
		}, nil,
			func(c *relock.Client, ctx context.Context, g relock.ForceGuard) (bool, error) {
				if g == (relock.ForceGuard{}) {
					return c.RWLock(name).ReadLock().ForceUnlock(ctx)
				}
				return c.RWLock(name).ReadLock().ForceUnlockIf(ctx, g)
			}},
		{"Semaphore", false, func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.Semaphore(name, 1).Acquire(ctx, 1)
		}, nil,
			func(c *relock.Client, ctx context.Context, g relock.ForceGuard) (bool, error) {
				if g == (relock.ForceGuard{}) {
					return c.Semaphore(name, 1).ForceRelease(ctx)
				}
				return c.Semaphore(name, 1).ForceReleaseIf(ctx, g)
			}},
	}
}

// awaitPresence waits until c's own channel is subscribed on the server:
// a force release tells a holder there (PUBSUB CHANNELS is what Redis
// routes a PUBLISH by).
func awaitPresence(t *testing.T, rdb redis.UniversalClient, c *relock.Client) {
	t.Helper()
	require.Eventually(t, func() bool {
		chans, err := rdb.PubSubChannels(context.Background(), "relock:client:"+c.ID()).Result()
		return err == nil && len(chans) == 1
	}, 5*time.Second, time.Millisecond, "the holder's Client never subscribed its own channel")
}

// snapshot is every key of the database with its DUMP, to show that a call
// changed nothing.
func snapshot(t *testing.T, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range allKeys(t, rdb) {
		v, err := rdb.Dump(context.Background(), k).Result()
		require.NoError(t, err)
		out[k] = v
	}
	return out
}

// A force release reaches the holder in another process at once, on the
// channel its Client keeps, not at its next renewal (10 s away here): its
// hold context ends with ErrForceUnlocked, and its Observer reports
// LossForceUnlocked.
func TestForceUnlockTellsAHolderElsewhereAtOnce(t *testing.T) {
	for _, k := range forceKinds() {
		t.Run(k.name, func(t *testing.T) {
			b := newReal(t)
			ctx := context.Background()
			ev := &events{}
			holder := relock.New(b.newConn(t), relock.WithObserver(ev.observer()), relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = holder.Close() })
			operator := relock.New(b.newConn(t), relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = operator.Close() })

			hctx, err := k.hold(holder, ctx)
			require.NoError(t, err)
			awaitPresence(t, b.rdb, holder)
			start := time.Now()
			freed, err := k.force(operator, ctx, relock.ForceGuard{})
			require.NoError(t, err)
			require.True(t, freed)
			select {
			case <-hctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the holder was not told of the force release")
			}
			took := time.Since(start)
			t.Logf("%s: the holder learned of the force release in %v", k.name, took)
			assert.Less(t, took, time.Second, "the holder learned it by the renewal fallback (every 10 s)")
			cause := context.Cause(hctx)
			assert.ErrorIs(t, cause, relock.ErrForceUnlocked)
			assert.ErrorIs(t, cause, relock.ErrLockLost)
			lost := ev.lostEvents()
			require.Len(t, lost, 1)
			assert.Equal(t, relock.LossForceUnlocked, lost[0].Reason)
			assert.ErrorIs(t, lost[0].Cause, relock.ErrForceUnlocked)
		})
	}
}

// A guarded force release frees the hold it names, and only that one: run
// again after the lock passed to another holder (an operator repeating
// the command), or with a stale token, it frees nothing, leaves Redis as
// it was, and names the holder now.
func TestForceUnlockIfFreesOnlyTheHoldItNames(t *testing.T) {
	for _, k := range forceKinds() {
		t.Run(k.name, func(t *testing.T) {
			b := newReal(t)
			ctx := context.Background()
			first := relock.New(b.newConn(t), relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = first.Close() })
			next := relock.New(b.newConn(t), relock.WithLogger(quietLogger()), relock.WithName("next-proc"))
			t.Cleanup(func() { _ = next.Close() })
			operator := relock.New(b.newConn(t), relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = operator.Close() })

			h1, err := k.hold(first, ctx)
			require.NoError(t, err)
			seen := relock.ForceGuard{Owner: ownerField(t, first, h1)}
			if k.tokens {
				seen.Token, err = k.token(first, h1)
				require.NoError(t, err)
			}
			freed, err := k.force(operator, ctx, seen)
			require.NoError(t, err)
			require.True(t, freed, "the guard names the hold: it is freed")
			<-h1.Done()

			h2, err := k.hold(next, ctx)
			require.NoError(t, err)
			nextOwner := ownerField(t, next, h2)
			guards := []relock.ForceGuard{seen, {Owner: seen.Owner}}
			if k.tokens {
				guards = append(guards, relock.ForceGuard{Token: seen.Token}, relock.ForceGuard{Owner: nextOwner, Token: seen.Token})
			}
			for _, g := range guards {
				before := snapshot(t, b.rdb)
				freed, err = k.force(operator, ctx, g)
				assert.False(t, freed, "%v", g)
				require.ErrorIs(t, err, relock.ErrHolderChanged, "%v", g)
				var hc *relock.HolderChangedError
				require.True(t, errors.As(err, &hc))
				assert.Equal(t, []relock.Holder{{Owner: nextOwner, ClientName: "next-proc"}}, hc.Holders, "the error names who holds it now")
				assert.Equal(t, g, hc.Expected)
				assert.Contains(t, err.Error(), nextOwner+" (next-proc)")
				if k.tokens {
					tok, err := k.token(next, h2)
					require.NoError(t, err)
					assert.Equal(t, tok, hc.Token)
				}
				assert.Equal(t, before, snapshot(t, b.rdb), "a refused force release changed Redis (%v)", g)
				require.NoError(t, h2.Err(), "the next holder's hold is intact")
			}

			_, err = k.force(operator, ctx, relock.ForceGuard{Owner: "~x"})
			assert.ErrorIs(t, err, relock.ErrInvalidArgument)
			if !k.tokens {
				_, err = k.force(operator, ctx, relock.ForceGuard{Owner: nextOwner, Token: 3})
				assert.ErrorIs(t, err, relock.ErrInvalidArgument, "a hold without tokens cannot be guarded by one")
			}
			freed, err = k.force(operator, ctx, relock.ForceGuard{Owner: nextOwner})
			require.NoError(t, err)
			assert.True(t, freed)
			freed, err = k.force(operator, ctx, relock.ForceGuard{Owner: nextOwner})
			require.NoError(t, err)
			assert.False(t, freed, "nobody holds it: nothing to free, nothing to refuse")
		})
	}
}
