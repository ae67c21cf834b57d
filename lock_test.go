package relock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

func TestLockWritesOwnerHashWithWatchdogLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		l := c.Lock("orders")
		ctx, err := l.Lock(context.Background())
		require.NoError(t, err)

		owner := ownerField(t, c, ctx)
		assert.Equal(t, map[string]string{owner: "1"}, owners(t, b.rdb, "relock:{orders}"))
		tok, err := l.Token(ctx)
		require.NoError(t, err)
		assert.Positive(t, tok)
		assert.Equal(t, tok, storedToken(t, b.rdb, "relock:{orders}"), "the hash keeps the hold's token")
		ttl := pttl(t, b.rdb, "relock:{orders}")
		assert.Greater(t, ttl, 25*time.Second)
		assert.LessOrEqual(t, ttl, relock.DefaultWatchdogLease)

		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		held, err := l.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, held)
		held, err = l.HoldCount(context.Background())
		require.NoError(t, err)
		assert.Zero(t, held, "a context without owner holds nothing")

		require.NoError(t, l.Unlock(ctx))
		assert.Empty(t, hgetall(t, b.rdb, "relock:{orders}"))
		requireOnlyExpiringLeftovers(t, b.rdb)
		assert.Equal(t, tok, storedTail(t, b.rdb, "relock:{orders}"), "the tail keeps the released hold's token")
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrUnlocked)
		locked, err = l.IsLocked(context.Background())
		require.NoError(t, err)
		assert.False(t, locked)
		assert.Equal(t, 0, c.TrackedHolds(), "no hold record is left behind")
	})
}

// The seeds' example: createOrder takes the lock and calls deductStock, which
// takes it again with the same context and must re-enter, not deadlock.
func TestReentrancyFollowsTheContext(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		l := c.Lock("order:42")
		key := l.Key()
		var counts []map[string]string

		deductStock := func(ctx context.Context) error {
			ctx, err := l.Lock(ctx)
			if err != nil {
				return err
			}
			n, err := l.HoldCount(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, n)
			counts = append(counts, hgetall(t, b.rdb, key))
			return l.Unlock(ctx)
		}
		createOrder := func(ctx context.Context) error {
			ctx, err := l.Lock(ctx)
			if err != nil {
				return err
			}
			defer func() { require.NoError(t, l.Unlock(ctx)) }()
			counts = append(counts, hgetall(t, b.rdb, key))
			if err := deductStock(ctx); err != nil {
				return err
			}
			require.NoError(t, ctx.Err(), "the inner Unlock must not end the outer hold")
			counts = append(counts, hgetall(t, b.rdb, key))
			return nil
		}
		require.NoError(t, createOrder(context.Background()))

		require.Len(t, counts, 3)
		var owner string
		for f := range ownersOf(t, counts[0]) {
			owner = f
		}
		assert.Equal(t, map[string]string{owner: "1"}, ownersOf(t, counts[0]))
		assert.Equal(t, map[string]string{owner: "2"}, ownersOf(t, counts[1]))
		assert.Equal(t, map[string]string{owner: "1"}, ownersOf(t, counts[2]))
		for _, f := range []string{"~g", "~t"} {
			assert.Equal(t, counts[0][f], counts[1][f], "a re-entry is the same hold: %s", f)
			assert.Equal(t, counts[0][f], counts[2][f], "a re-entry's Unlock keeps the hold: %s", f)
		}
		assert.Empty(t, hgetall(t, b.rdb, key))
		requireOnlyExpiringLeftovers(t, b.rdb)
	})
}

func TestSecondOwnerWaitsAndGetsInAfterUnlock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c1 := b.newClient(t)
		c2 := relock.New(b.newConn(t)) // another process
		t.Cleanup(func() { _ = c2.Close() })
		ctx1, err := c1.Lock("stock").Lock(context.Background())
		require.NoError(t, err)

		_, err = c2.Lock("stock").TryLock(context.Background(), 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained, "a single attempt fails while held")

		got := make(chan context.Context)
		go func() {
			ctx2, err := c2.Lock("stock").Lock(context.Background())
			assert.NoError(t, err)
			got <- ctx2
		}()
		// The waiter is asleep on the unlock channel: it has subscribed.
		require.Eventually(t, func() bool { return c2.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
		select {
		case <-got:
			t.Fatal("second owner got the lock while the first held it")
		default:
		}
		require.NoError(t, c1.Lock("stock").Unlock(ctx1))
		ctx2 := <-got
		assert.Equal(t, map[string]string{ownerField(t, c2, ctx2): "1"}, owners(t, b.rdb, "relock:{stock}"))
		require.NoError(t, c2.Lock("stock").Unlock(ctx2))
	})
}

func TestOneUnlockTooManyIsAnErrorAndChangesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		l := c.Lock("x")
		ctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
		err = l.Unlock(ctx)
		require.ErrorIs(t, err, relock.ErrNotHeld)

		// Someone else holds it now: an extra Unlock by the old owner leaves
		// their hold exactly as it was.
		other, err := l.Lock(context.Background())
		require.NoError(t, err)
		before := hgetall(t, b.rdb, l.Key())
		require.ErrorIs(t, l.Unlock(ctx), relock.ErrNotHeld)
		require.ErrorIs(t, l.Unlock(context.Background()), relock.ErrNotHeld, "a context that never locked")
		assert.Equal(t, before, hgetall(t, b.rdb, l.Key()))
		require.NoError(t, other.Err())
		require.NoError(t, l.Unlock(other))
	})
}

func TestUnlockWorksWithCancelledContext(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		l := c.Lock("cancel")
		parent, cancel := context.WithCancel(context.Background())
		ctx, err := l.Lock(parent)
		require.NoError(t, err)
		cancel()
		require.Error(t, ctx.Err(), "the hold's context derives from the caller's")
		require.NoError(t, l.Unlock(ctx))
		assert.Empty(t, hgetall(t, b.rdb, l.Key()))
		requireOnlyExpiringLeftovers(t, b.rdb)
	})
}

func TestForceUnlockFreesTheLockAndTellsTheHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		l := c.Lock("force")
		ctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		_, err = l.Lock(ctx) // re-enter: count 2
		require.NoError(t, err)

		other := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = other.Close() })
		tok, err := l.Token(ctx)
		require.NoError(t, err)
		freed, err := other.Lock("force").ForceUnlock(context.Background())
		require.NoError(t, err)
		assert.True(t, freed)
		assert.Empty(t, hgetall(t, b.rdb, l.Key()))
		requireOnlyExpiringLeftovers(t, b.rdb)
		assert.Equal(t, tok, storedTail(t, b.rdb, l.Key()), "a forced release keeps the token in the tail too")

		freed, err = l.ForceUnlock(context.Background())
		require.NoError(t, err)
		assert.False(t, freed, "nothing left to free")
		// This Client's own holds end at once when it force-unlocks.
		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrLockLost)
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrLockLost)
	})
}

func TestLeaseExpiresByItself(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		l := c.Lock("leased")
		const lease = 150 * time.Millisecond
		ctx, err := l.TryLock(context.Background(), 0, lease)
		require.NoError(t, err)
		tok, err := l.Token(ctx)
		require.NoError(t, err)
		ttl := pttl(t, b.rdb, l.Key())
		assert.Greater(t, ttl, time.Duration(0))
		assert.LessOrEqual(t, ttl, lease)
		assert.Equal(t, 0, c.WatchedHolds(), "a leased hold is not renewed")

		// The holder is told when its lease ends...
		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrLockLost)
		// ...and Redis lets the key go.
		b.expire(lease)
		// An expired hold leaves nothing behind, not even a tail: it was
		// never released.
		require.Eventually(t, func() bool { return len(allKeys(t, b.rdb)) == 0 }, 5*time.Second, 5*time.Millisecond)
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrLockLost)

		// A new owner gets it, with a greater fencing token.
		ctx2, err := l.TryLock(context.Background(), 0, time.Second)
		require.NoError(t, err)
		tok2, err := l.Token(ctx2)
		require.NoError(t, err)
		assert.Greater(t, tok2, tok)
		require.NoError(t, l.Unlock(ctx2))
	})
}

func TestHoldCountAndTTL(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		l := c.Lock("count")
		ttl, err := l.TTL(context.Background())
		require.NoError(t, err)
		assert.Zero(t, ttl)
		ctx, err := l.TryLock(context.Background(), 0, 10*time.Second)
		require.NoError(t, err)
		ctx2, err := l.TryLock(ctx, 0, time.Second)
		require.NoError(t, err)
		n, err := l.HoldCount(ctx2)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		ttl, err = l.TTL(ctx)
		require.NoError(t, err)
		assert.Greater(t, ttl, 5*time.Second, "re-entry with a shorter lease does not shorten the lock's")
		require.NoError(t, l.Unlock(ctx2))
		n, err = l.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.NoError(t, l.Unlock(ctx))
		n, err = l.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n)
	})
}

// Many goroutines over two Clients increment a counter with a read and a
// separate write: only mutual exclusion keeps every update.
func TestCounterUnderLockLosesNoUpdate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		clients := []*relock.Client{b.newClient(t), relock.New(b.newConn(t))}
		t.Cleanup(func() { _ = clients[1].Close() })
		const goroutines, rounds = 10, 10
		var wg sync.WaitGroup
		inside := 0 // also checked by the race detector
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := clients[g%2]
				l := c.Lock("counter")
				for range rounds {
					ctx, err := l.Lock(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					inside++
					assert.Equal(t, 1, inside)
					v, err := b.rdb.Get(ctx, "n").Int()
					if errors.Is(err, redis.Nil) {
						err = nil
					}
					assert.NoError(t, err)
					assert.NoError(t, b.rdb.Set(ctx, "n", v+1, 0).Err())
					inside--
					assert.NoError(t, l.Unlock(ctx))
				}
			}()
		}
		wg.Wait()
		n, err := b.rdb.Get(context.Background(), "n").Int()
		require.NoError(t, err)
		assert.Equal(t, goroutines*rounds, n)
	})
}

func TestBadInputIsAnErrorAndTouchesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		ctx := context.Background()
		l := c.Lock("ok")
		cases := map[string]func() error{
			"empty name":     func() error { _, err := c.Lock("").Lock(ctx); return err },
			"huge name":      func() error { _, err := c.Lock(string(make([]byte, 70<<10))).Lock(ctx); return err },
			"nil context":    func() error { _, err := l.Lock(nil); return err }, //nolint:staticcheck // the point of the test
			"negative wait":  func() error { _, err := l.TryLock(ctx, -time.Second, 0); return err },
			"negative lease": func() error { _, err := l.TryLock(ctx, 0, -time.Second); return err },
			"sub-ms lease":   func() error { _, err := l.TryLock(ctx, 0, 500*time.Microsecond); return err },
			"absurd lease":   func() error { _, err := l.TryLock(ctx, 0, 100*365*24*time.Hour); return err },
			"absurd wait":    func() error { _, err := l.TryLock(ctx, 100*365*24*time.Hour, 0); return err },
			"nil client":     func() error { _, err := relock.New(nil).Lock("x").Lock(ctx); return err },
			"bad lease option": func() error {
				_, err := relock.New(b.rdb, relock.WithWatchdogLease(-1)).Lock("x").Lock(ctx)
				return err
			},
			"bad prefix":     func() error { _, err := relock.New(b.rdb, relock.WithKeyPrefix("a{b")).Lock("x").Lock(ctx); return err },
			"nil option":     func() error { _, err := relock.New(b.rdb, nil).Lock("x").Lock(ctx); return err },
			"nil logger":     func() error { _, err := relock.New(b.rdb, relock.WithLogger(nil)).Lock("x").Lock(ctx); return err },
			"unlock nil ctx": func() error { return l.Unlock(nil) },                     //nolint:staticcheck
			"force nil ctx":  func() error { _, err := l.ForceUnlock(nil); return err }, //nolint:staticcheck
		}
		for name, call := range cases {
			err := call()
			assert.ErrorIs(t, err, relock.ErrInvalidArgument, name)
		}
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrNotHeld, "an Unlock with a context that never locked")
		assert.Empty(t, allKeys(t, b.rdb), "bad input changed Redis")
	})
}

func TestClosedClient(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := relock.New(b.rdb)
		l := c.Lock("closing")
		ctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.NoError(t, c.Close(), "Close twice is fine")
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrClientClosed)
		_, err = l.Lock(context.Background())
		assert.ErrorIs(t, err, relock.ErrClientClosed)
		assert.Empty(t, hgetall(t, b.rdb, l.Key()), "Close releases its holds")
		require.NoError(t, l.Unlock(ctx), "a deferred Unlock after Close returns nil")
		requireOnlyExpiringLeftovers(t, b.rdb)
	})
}

// A reply lost after the server ran the script makes go-redis send it again.
// The replay must neither count a hold twice nor release one twice.
func TestReplayedScriptsCountOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	drop := redistest.NewReplyDropper()
	rdb.AddHook(drop)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("replay")
	bg := context.Background()
	require.NoError(t, rdb.Ping(bg).Err())
	// Load the scripts first so that the dropped command is the EVALSHA.
	warm, err := l.Lock(bg)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(warm))

	warmTok := storedTail(t, rdb, l.Key())

	drop.Arm("evalsha", 1)
	ctx, err := l.Lock(bg)
	require.NoError(t, err)
	require.EqualValues(t, 1, drop.Dropped(), "the acquire reply was dropped")
	owner := ownerField(t, c, ctx)
	first := hgetall(t, rdb, l.Key())
	assert.Equal(t, map[string]string{owner: "1"}, ownersOf(t, first))
	tok, err := l.Token(ctx)
	require.NoError(t, err)
	assert.Greater(t, tok, warmTok)
	assert.Equal(t, tok, storedToken(t, rdb, l.Key()), "the replay answered with the token it granted, not a new one")

	drop.Arm("evalsha", 1)
	inner, err := l.Lock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, drop.Dropped())
	second := hgetall(t, rdb, l.Key())
	assert.Equal(t, map[string]string{owner: "2"}, ownersOf(t, second))
	assert.Equal(t, first["~g"], second["~g"], "the replayed re-entry is the same hold")
	assert.Equal(t, first["~t"], second["~t"])

	drop.Arm("evalsha", 1)
	require.NoError(t, l.Unlock(inner))
	require.EqualValues(t, 3, drop.Dropped())
	assert.Equal(t, map[string]string{owner: "1"}, owners(t, rdb, l.Key()))

	drop.Arm("evalsha", 1)
	require.NoError(t, l.Unlock(ctx), "a replayed final release is success, not ErrLockLost")
	require.EqualValues(t, 4, drop.Dropped())
	assert.Empty(t, hgetall(t, rdb, l.Key()))
	requireOnlyExpiringLeftovers(t, rdb)
	assert.Equal(t, tok, storedTail(t, rdb, l.Key()))

	token, err := tokenAfterLock(l)
	require.NoError(t, err)
	assert.Greater(t, token, tok, "the next acquisition's token is above the replayed hold's")
}

func tokenAfterLock(l *relock.Lock) (int64, error) {
	ctx, err := l.Lock(context.Background())
	if err != nil {
		return 0, err
	}
	defer l.Unlock(ctx) //nolint:errcheck
	return l.Token(ctx)
}

func TestFencingTokensIncreaseAndSurviveReentry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c1 := b.newClient(t)
		c2 := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = c2.Close() })
		var last int64
		for i := range 10 {
			l := []*relock.Client{c1, c2}[i%2].Lock("fenced")
			ctx, err := l.Lock(context.Background())
			require.NoError(t, err)
			tok, err := l.Token(ctx)
			require.NoError(t, err)
			assert.Positive(t, tok)
			assert.Greater(t, tok, last, "tokens strictly increase")
			inner, err := l.Lock(ctx)
			require.NoError(t, err)
			innerTok, err := l.Token(inner)
			require.NoError(t, err)
			assert.Equal(t, tok, innerTok, "re-entry keeps the hold's token")
			require.NoError(t, l.Unlock(inner))
			require.NoError(t, l.Unlock(ctx))
			last = tok
		}
		_, err := c1.Lock("fenced").Token(context.Background())
		assert.ErrorIs(t, err, relock.ErrNotHeld)
	})
}

func TestNamesWithBracesShareOneSlot(t *testing.T) {
	c := relock.New(newMini(t).rdb)
	t.Cleanup(func() { _ = c.Close() })
	for _, name := range []string{"a}b", "{x}", "}{", "%7D", "plain"} {
		k := c.Lock(name).Key()
		assert.Equal(t, 1, countRune(k, '{'), k)
		assert.Equal(t, 1, countRune(k, '}'), k)
	}
	assert.NotEqual(t, c.Lock("}").Key(), c.Lock("%7D").Key(), "escaping is injective")
}

func countRune(s string, r rune) int {
	n := 0
	for _, c := range s {
		if c == r {
			n++
		}
	}
	return n
}

// Uncontended, Lock is one command (one round trip) and Unlock is one.
func TestUncontendedLockAndUnlockAreOneRoundTripEach(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	l := c.Lock("rt")
	ctx := context.Background()
	warm, err := l.Lock(ctx) // loads the scripts (SCRIPT LOAD once, on NOSCRIPT)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(warm))
	// The first hold also subscribes the Client's presence channel (once
	// per Client, on the subscriber's connection): let it land first.
	presence := "relock:client:" + c.ID()
	require.Eventually(t, func() bool {
		n, err := b.rdb.PubSubNumSub(ctx, presence).Result()
		return err == nil && n[presence] == 1
	}, 5*time.Second, 5*time.Millisecond)

	sent := func() int64 {
		calls, err := redistest.CommandCalls(ctx, b.rdb)
		require.NoError(t, err)
		return redistest.ClientCommands(nil, calls)
	}
	before := sent()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), sent()-before, "Lock")
	before = sent()
	require.NoError(t, l.Unlock(held))
	assert.Equal(t, int64(1), sent()-before, "Unlock")
}
