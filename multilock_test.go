package relock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// scriptCalls is how many scripts the server has run so far.
func scriptCalls(t testing.TB, srv *redistest.Server) int64 {
	t.Helper()
	calls, err := redistest.CommandCalls(context.Background(), srv.Client())
	require.NoError(t, err)
	return calls["evalsha"] + calls["eval"]
}

func TestMultiLockTakesPartsOfOneRedisInOneScriptCall(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		parts := []*relock.Lock{c.Lock("c"), c.Lock("a"), c.Lock("b"), c.Lock("a")}
		m := relock.NewMultiLock(parts...)
		require.Len(t, m.Locks(), 3, "the same lock twice counts once")
		reversed := relock.NewMultiLock(c.Lock("b"), c.Lock("a"), c.Lock("c"))
		for i, l := range m.Locks() {
			assert.Equal(t, l.Name(), reversed.Locks()[i].Name(), "one order whatever the order given")
		}

		warm, err := m.Lock(context.Background()) // the server learns the scripts
		require.NoError(t, err)
		last := map[string]int64{}
		for _, name := range []string{"a", "b", "c"} {
			last[name], err = c.Lock(name).Token(warm)
			require.NoError(t, err)
		}
		require.NoError(t, m.Unlock(warm))
		var before int64
		if b.real() {
			before = scriptCalls(t, b.srv)
		}
		from := time.Now()
		ctx, err := m.Lock(context.Background())
		require.NoError(t, err)
		to := time.Now()
		if b.real() {
			assert.Equal(t, int64(1), scriptCalls(t, b.srv)-before, "one script call for three parts")
		}
		owner := ownerField(t, c, ctx)
		var gen string
		for _, name := range []string{"a", "b", "c"} {
			key := "relock:{" + name + "}"
			h := assertHeldBy(t, b.rdb, key, owner, 1, name)
			assert.Greater(t, pttl(t, b.rdb, key), 25*time.Second, name)
			if gen == "" {
				gen = h.gen
			}
			assert.Equal(t, gen, h.gen, "one script call, one op id: the generation of every part")
			assert.Equal(t, h.gen, h.op, "a new hold's last op is its acquire")
			tok, err := c.Lock(name).Token(ctx)
			require.NoError(t, err, "each part is an ordinary hold of its Client")
			assert.Equal(t, h.token, tok, name)
			assertClockToken(t, tok, from, to, name)
			// Tokens order the holds of one name; parts of one call may
			// share one (Valkey's TIME stands still during a script).
			assert.Greater(t, tok, last[name], "%s: above its last hold's token", name)
		}
		assert.Equal(t, 3, c.WatchedHolds(), "the Client's watchdog renews every part")

		require.NoError(t, m.Unlock(ctx))
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrUnlocked)
		for _, name := range []string{"a", "b", "c"} {
			assert.Empty(t, hgetall(t, b.rdb, "relock:{"+name+"}"), name)
			tok, err := c.Lock(name).Token(ctx)
			assert.ErrorIs(t, err, relock.ErrNotHeld)
			assert.Zero(t, tok)
		}
		assert.Empty(t, heldKeys(t, b.rdb, defaultLatch), "only tails and latches are left")
		assert.Zero(t, c.TrackedHolds())
		assert.Zero(t, c.WatchedHolds())
		assert.ErrorIs(t, m.Unlock(ctx), relock.ErrNotHeld)
	})
}

func TestMultiLockIsReentrantAndSharesHoldsWithItsParts(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		a, bb := c.Lock("a"), c.Lock("b")
		m := relock.NewMultiLock(a, bb)
		ctx, err := m.Lock(context.Background())
		require.NoError(t, err)
		tokA, err := a.Token(ctx)
		require.NoError(t, err)
		ctx2, err := m.TryLock(ctx, 0, 0)
		require.NoError(t, err, "re-entry never waits")
		ctx3, err := a.Lock(ctx2)
		require.NoError(t, err, "a part re-enters with the MultiLock's context")
		owner := ownerField(t, c, ctx)
		ha := assertHeldBy(t, b.rdb, a.Key(), owner, 3)
		hb := assertHeldBy(t, b.rdb, bb.Key(), owner, 2)
		assert.Equal(t, tokA, ha.token)
		tok, err := a.Token(ctx3)
		require.NoError(t, err)
		assert.Equal(t, tokA, tok, "re-entry keeps the token")

		require.NoError(t, a.Unlock(ctx3))
		assert.Equal(t, ha.gen, assertHeldBy(t, b.rdb, a.Key(), owner, 2).gen, "same generation")
		require.NoError(t, m.Unlock(ctx2))
		assert.NoError(t, ctx.Err(), "the outer hold is still open")
		assert.Equal(t, ha.gen, assertHeldBy(t, b.rdb, a.Key(), owner, 1).gen)
		assert.Equal(t, hb.gen, assertHeldBy(t, b.rdb, bb.Key(), owner, 1).gen)
		require.NoError(t, m.Unlock(ctx))
		assert.Empty(t, hgetall(t, b.rdb, a.Key()))
		assert.Empty(t, hgetall(t, b.rdb, bb.Key()))

		// Unlock ends the entries of the MultiLock's context and nothing
		// else: a part the owner holds on its own stays held.
		pctx, err := a.Lock(context.Background())
		require.NoError(t, err)
		powner := ownerField(t, c, pctx)
		mctx, err := m.Lock(pctx)
		require.NoError(t, err)
		assertHeldBy(t, b.rdb, a.Key(), powner, 2)
		assertHeldBy(t, b.rdb, bb.Key(), powner, 1)
		require.NoError(t, m.Unlock(mctx))
		assert.ErrorIs(t, context.Cause(mctx), relock.ErrUnlocked)
		assert.NoError(t, pctx.Err(), "the part's own hold goes on")
		assertHeldBy(t, b.rdb, a.Key(), powner, 1)
		assert.Empty(t, hgetall(t, b.rdb, bb.Key()))
		assert.ErrorIs(t, m.Unlock(mctx), relock.ErrNotHeld, "already unlocked")
		require.NoError(t, a.Unlock(pctx))
		assert.Empty(t, hgetall(t, b.rdb, a.Key()))
		assert.Zero(t, c.TrackedHolds())
	})
}

// Unlock with a context that is not a MultiLock hold context — a hold
// context of one part, or none — returns ErrNotHeld and changes nothing,
// in Redis or in the Client.
func TestMultiLockUnlockOfAnotherContextChangesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		a, bb := c.Lock("a"), c.Lock("b")
		m := relock.NewMultiLock(a, bb)
		assert.ErrorIs(t, m.Unlock(context.Background()), relock.ErrNotHeld)
		pctx, err := a.Lock(context.Background())
		require.NoError(t, err)
		before := hgetall(t, b.rdb, a.Key())
		assert.ErrorIs(t, m.Unlock(pctx), relock.ErrNotHeld)
		assert.NoError(t, pctx.Err())
		assert.Equal(t, before, hgetall(t, b.rdb, a.Key()))
		require.NoError(t, a.Unlock(pctx))
		assert.Empty(t, hgetall(t, b.rdb, a.Key()))
		assert.Zero(t, c.TrackedHolds(), "a refused Unlock keeps no hold record alive")
	})
}

func TestMultiLockRefusesBadInputWithoutTouchingRedis(t *testing.T) {
	b := newMini(t)
	c := b.newClient(t)
	for name, m := range map[string]*relock.MultiLock{
		"no locks": relock.NewMultiLock(),
		"nil lock": relock.NewMultiLock(c.Lock("a"), nil),
		"bad name": relock.NewMultiLock(c.Lock("a"), c.Lock("")),
	} {
		_, err := m.Lock(context.Background())
		assert.ErrorIs(t, err, relock.ErrInvalidArgument, name)
		assert.ErrorIs(t, m.Unlock(context.Background()), relock.ErrInvalidArgument, name)
	}
	m := relock.NewMultiLock(c.Lock("a"))
	_, err := m.TryLock(context.Background(), -time.Second, 0)
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	_, err = m.TryLock(context.Background(), 0, time.Nanosecond)
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = m.Lock(nil) //nolint:staticcheck
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	assert.Empty(t, allKeys(t, b.rdb))
}

// twoDeployments starts two real servers and returns a Client on each; parts
// of a MultiLock over both sort by deployment, so first/last say which.
func twoDeployments(t *testing.T) (srvs [2]*redistest.Server, clients [2]*relock.Client) {
	for i := range 2 {
		srvs[i] = redistest.Start(t)
		clients[i] = relock.New(srvs[i].Client())
		c := clients[i]
		t.Cleanup(func() { _ = c.Close() })
	}
	return srvs, clients
}

// A part held by someone else: whichever deployment sorts first, the parts
// taken before the busy one are released again and nothing stays held. The
// test puts the busy part on each deployment in turn, so in one of the two
// runs the other deployment's parts were taken first and rolled back.
func TestMultiLockFailureInTheMiddleLeavesNothingHeld(t *testing.T) {
	srvs, clients := twoDeployments(t)
	m := relock.NewMultiLock(clients[0].Lock("x"), clients[0].Lock("y"), clients[1].Lock("x"), clients[1].Lock("z"))
	reversed := relock.NewMultiLock(clients[1].Lock("z"), clients[1].Lock("x"), clients[0].Lock("y"), clients[0].Lock("x"))
	for i, l := range m.Locks() {
		assert.Equal(t, l.Key(), reversed.Locks()[i].Key(), "one order whatever the order given")
	}
	warm, err := m.Lock(context.Background()) // the servers learn the scripts
	require.NoError(t, err)
	require.NoError(t, m.Unlock(warm))
	rolledBack := false
	for busy := range 2 {
		free := 1 - busy
		// Someone else (another process) holds one part.
		other := relock.New(srvs[busy].Client())
		t.Cleanup(func() { _ = other.Close() })
		octx, err := other.Lock("x").Lock(context.Background())
		require.NoError(t, err)

		before := scriptCalls(t, srvs[free])
		_, err = m.TryLock(context.Background(), 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		switch n := scriptCalls(t, srvs[free]) - before; n {
		case 2: // taken in one call, released in one call
			rolledBack = true
		case 0: // sorted after the busy part: never reached
		default:
			t.Fatalf("%d script calls on the free deployment, want 0 or 2", n)
		}
		for _, key := range []string{"relock:{x}", "relock:{y}", "relock:{z}"} {
			assert.Empty(t, hgetall(t, srvs[free].Client(), key), key)
		}
		assertHeldBy(t, srvs[busy].Client(), "relock:{x}", ownerField(t, other, octx), 1)
		assert.Empty(t, hgetall(t, srvs[busy].Client(), "relock:{y}"))
		assert.Empty(t, hgetall(t, srvs[busy].Client(), "relock:{z}"))
		for _, c := range clients {
			assert.Zero(t, c.TrackedHolds())
		}

		// Waiting: while the part is busy, the MultiLock sleeps on its
		// channel (subscribed by the busy part's Client) holding nothing,
		// and gets everything once it is released.
		got := make(chan context.Context)
		go func() {
			ctx, err := m.TryLock(context.Background(), 30*time.Second, 0)
			assert.NoError(t, err)
			got <- ctx
		}()
		require.Eventually(t, func() bool { return clients[busy].SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
		// Each attempt takes the free parts for a moment; between attempts,
		// asleep, the waiter holds none of them (a waiter that kept them
		// would keep them for the whole sleep: the holder's 30 s lease).
		require.Eventually(t, func() bool { return len(lockKeys(t, srvs[free])) == 0 }, 5*time.Second, time.Millisecond,
			"nothing is held while waiting")
		require.NoError(t, other.Lock("x").Unlock(octx))
		ctx := <-got
		require.NotNil(t, ctx)
		for i, srv := range srvs {
			assertHeldBy(t, srv.Client(), "relock:{x}", ownerField(t, clients[i], ctx), 1)
		}
		require.NoError(t, m.Unlock(ctx))
		for _, srv := range srvs {
			assert.Empty(t, lockKeys(t, srv))
		}
		assert.Zero(t, clients[busy].SubscribedChannels())
	}
	assert.True(t, rolledBack, "one of the runs took parts before the busy one")
}

// A part whose Redis is down: the error says so, and the parts of the live
// deployment are not left held.
func TestMultiLockWithADeadDeploymentHoldsNothing(t *testing.T) {
	srvs, clients := twoDeployments(t)
	m := relock.NewMultiLock(clients[0].Lock("x"), clients[1].Lock("x"))
	for dead := range 2 {
		srvs[dead].Kill()
		_, err := m.TryLock(context.Background(), 0, 0)
		require.Error(t, err)
		assert.ErrorIs(t, err, relock.ErrUnavailable, "a Redis error, not contention")
		assert.Empty(t, lockKeys(t, srvs[1-dead]))
		srvs[dead].Restart()
	}
}

// lockKeys lists the keys that mean "held": all but tails and unlock
// latches, which outlive holds by design, for no longer than the unlock
// latch (asserted).
func lockKeys(t testing.TB, srv *redistest.Server) []string {
	t.Helper()
	return heldKeys(t, srv.Client(), defaultLatch)
}

// Unlock releases every part it can and names the ones it could not.
func TestMultiLockUnlockReleasesEveryPartAndReportsTheLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		m := relock.NewMultiLock(c.Lock("a"), c.Lock("b"), c.Lock("c"))
		ctx, err := m.Lock(context.Background())
		require.NoError(t, err)

		// Another process force-unlocks b; the watchdog's next renewal finds
		// it gone and tells the holder.
		other := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = other.Close() })
		freed, err := other.Lock("b").ForceUnlock(context.Background())
		require.NoError(t, err)
		require.True(t, freed)
		c.WatchdogTick()
		waitDone(t, ctx)
		require.ErrorIs(t, context.Cause(ctx), relock.ErrLockLost)

		err = m.Unlock(ctx)
		require.ErrorIs(t, err, relock.ErrLockLost)
		assert.Contains(t, err.Error(), `"b"`)
		assert.NotContains(t, err.Error(), `"a"`)
		assert.Empty(t, hgetall(t, b.rdb, "relock:{a}"), "the other parts are released")
		assert.Empty(t, hgetall(t, b.rdb, "relock:{c}"))
		assert.Empty(t, heldKeys(t, b.rdb, defaultLatch))
		assert.Zero(t, c.TrackedHolds())
	})
}

// go-redis resends a script whose reply was lost: neither the acquire nor
// the release may count twice.
func TestMultiLockSurvivesLostReplies(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	d := redistest.NewReplyDropper()
	rdb.AddHook(d)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	m := relock.NewMultiLock(c.Lock("a"), c.Lock("b"))
	warm, err := m.Lock(context.Background()) // the server learns both scripts
	require.NoError(t, err)
	require.NoError(t, m.Unlock(warm))
	ctx, err := m.Lock(context.Background())
	require.NoError(t, err)
	d.Arm("EVALSHA", 1)
	ctx2, err := m.Lock(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), d.Dropped())
	owner := ownerField(t, c, ctx)
	ha := assertHeldBy(t, rdb, "relock:{a}", owner, 2, "the replayed re-entry counted once")
	hb := assertHeldBy(t, rdb, "relock:{b}", owner, 2)
	assert.NotEqual(t, ha.gen, ha.op, "the re-entry is the last op")
	assert.Equal(t, ha.op, hb.op, "one request for both parts")
	d.Arm("EVALSHA", 1)
	require.NoError(t, m.Unlock(ctx2))
	ha2 := assertHeldBy(t, rdb, "relock:{a}", owner, 1, "the replayed release counted once")
	assert.Equal(t, ha.gen, ha2.gen, "the same hold")
	assert.Equal(t, ha.token, ha2.token)
	assertHeldBy(t, rdb, "relock:{b}", owner, 1)
	d.Arm("EVALSHA", 1)
	require.NoError(t, m.Unlock(ctx), "a replayed final release is recognised by its latch")
	require.Equal(t, int64(3), d.Dropped())
	assert.Empty(t, hgetall(t, rdb, "relock:{a}"))
	assert.Empty(t, hgetall(t, rdb, "relock:{b}"))
	assert.Equal(t, ha.token, tailOf(t, rdb, tailKey("relock:{a}"), defaultLatch), "the tail keeps the last token")
	assert.Empty(t, heldKeys(t, rdb, defaultLatch))
	assert.Zero(t, c.TrackedHolds())
}

// Two MultiLocks over overlapping sets on two deployments, given their locks
// in opposite orders, taken by many goroutines of two processes: none may
// deadlock (every Lock returns), and no lock is ever inside twice.
func TestOverlappingMultiLocksNeitherDeadlockNorOverlap(t *testing.T) {
	srvs, _ := twoDeployments(t)
	const processes, goroutines, rounds = 2, 8, 15
	var inside [4]atomic.Int32 // a, b on deployment 0; c, d on deployment 1
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for p := range processes {
		c0, c1 := relock.New(srvs[0].Client()), relock.New(srvs[1].Client())
		t.Cleanup(func() { _ = c0.Close(); _ = c1.Close() })
		// m1 = {a, b, c}, m2 = {c, b, d}: they share b and c.
		m1 := relock.NewMultiLock(c0.Lock("a"), c0.Lock("b"), c1.Lock("c"))
		m2 := relock.NewMultiLock(c1.Lock("d"), c1.Lock("c"), c0.Lock("b"))
		for g := range goroutines {
			m, idx := m1, []int{0, 1, 2}
			if (g+p)%2 == 1 {
				m, idx = m2, []int{3, 2, 1}
			}
			wg.Go(func() {
				for range rounds {
					hctx, err := m.Lock(ctx)
					if !assert.NoError(t, err, "a deadlock would end in the test's timeout") {
						return
					}
					for _, i := range idx {
						assert.Equal(t, int32(1), inside[i].Add(1), fmt.Sprintf("lock %d held twice", i))
					}
					for _, i := range idx {
						inside[i].Add(-1)
					}
					assert.NoError(t, m.Unlock(hctx))
				}
			})
		}
	}
	wg.Wait()
	for _, srv := range srvs {
		for _, k := range []string{"relock:{a}", "relock:{b}", "relock:{c}", "relock:{d}"} {
			assert.Empty(t, hgetall(t, srv.Client(), k))
		}
		assert.Empty(t, lockKeys(t, srv))
	}
}

// A context that holds a lock of one Client and is then used with another
// (as MultiLock and RedLock do) must not be mistaken for an owner that the
// second Client created itself.
func TestOwnersAreDistinctAcrossClients(t *testing.T) {
	b := newMini(t)
	c1 := relock.New(b.newConn(t))
	c2 := relock.New(b.newConn(t))
	t.Cleanup(func() { _ = c1.Close(); _ = c2.Close() })
	ctx1, err := c1.Lock("a").Lock(context.Background())
	require.NoError(t, err)
	ctx2, err := c2.Lock("x").Lock(ctx1) // c2 writes ctx1's owner
	require.NoError(t, err)
	_, err = c2.Lock("x").TryLock(context.Background(), 0, 0) // c2's first own owner
	require.ErrorIs(t, err, relock.ErrNotObtained, "a new owner must not re-enter another's hold")
	assertHeldBy(t, b.rdb, "relock:{x}", ownerField(t, c2, ctx1), 1)
	require.NoError(t, c2.Lock("x").Unlock(ctx2))
	require.NoError(t, c1.Lock("a").Unlock(ctx1))
}
