package relock_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Grants delivered by pub/sub decide nothing by themselves: a
// late grant is claimed, a hand-over to a shorter lease wakes every queued
// waiter, a MultiLock re-checks on "handed", WithReplicas covers the
// hand-over, hand-over tokens follow the rule of every token, and a grant to
// a waiter that no longer waits is released at once.

// queuedWaiters returns how many waiters of kind k are queued on the lock
// whose hash is key: a Lock's queue is in fields of its hash (lockQueueLen),
// a WriteLock's in the sorted set <hash>:q, counted by the hash's mark ~q,
// a FairLock's the sorted set <hash>:z.
func queuedWaiters(t *testing.T, rdb redis.UniversalClient, k lockKind, key string) int {
	t.Helper()
	ctx := context.Background()
	switch k.name {
	case "FairLock":
		return int(rdb.ZCard(ctx, key+":z").Val())
	case "WriteLock":
		// The count that ends the mark of its queue (see rw_common.lua).
		f := strings.Fields(rdb.HGet(ctx, key, "~q").Val())
		if len(f) != 4 {
			return 0
		}
		n, err := strconv.Atoi(f[3])
		require.NoError(t, err)
		return n
	}
	return lockQueueLen(t, rdb, key)
}

// A waiter whose grant reaches it late (only its subscriber connection is
// slow) must not take it once the grant's hold has run out and another
// holder has the lock: the waiter's timer attempt finds X holding and queues
// it again, under the same id, and the late grant then matches its new
// place. The grant is claimed by an attempt, which finds X, so the waiter
// waits on; X's release then hands it the lock, with a token above X's.
//
// Timeline (t1: H's release hands the lock to W, W's lease 1.2 s): X takes
// the lock at t1+1.2 s, W's timer attempt comes at t1+1.5 s (H's lease end),
// the grant reaches W at t1+1.7 s: within a third of W's lease of that
// attempt, so the trust rule alone would take it as it is.
func TestLateGrantAfterItsLeaseIsClaimedNotTaken(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	const name = "late-grant"
	const leaseW, untilTimer, subDelay = 1200 * time.Millisecond, 1500 * time.Millisecond, 1700 * time.Millisecond
	h := relock.New(srv.Client())
	x := relock.New(srv.Client())
	faults := redistest.NewConnFaults()
	rdbW := srv.Client()
	rdbW.AddHook(faults)
	w := relock.New(rdbW)
	t.Cleanup(func() { _ = h.Close(); _ = x.Close(); _ = w.Close() })
	key := h.Lock(name).Key()

	hctx, err := h.Lock(name).TryLock(context.Background(), 0, 3*time.Second)
	require.NoError(t, err)
	got := make(chan granted, 1)
	go func() {
		ctx, err := w.Lock(name).TryLock(context.Background(), relock.WaitForever, leaseW)
		got <- granted{ctx, err}
	}()
	require.Eventually(t, func() bool { return queueLen(t, srv, key) == 1 }, 2*time.Second, time.Millisecond)
	left := pttl(t, srv.Client(), key)
	require.Greater(t, left, untilTimer+100*time.Millisecond, "the waiter queued too late for the timeline")
	time.Sleep(left - untilTimer) // W's timer attempt is now untilTimer away

	faults.SetDelay(redistest.SubscriberConn, subDelay)
	require.NoError(t, h.Lock(name).Unlock(hctx))
	xgot := lockAsync(x.Lock(name))
	xctx := mustGet(t, xgot, 3*time.Second) // after W's grant ran out
	xToken := token(t, x.Lock(name), xctx)

	// W's attempt (at untilTimer) and the late grant (at subDelay) come and
	// go; W must still be waiting behind X well after both.
	select {
	case g := <-got:
		require.NoError(t, g.err)
		t.Fatalf("W took a stale grant while X holds: W's token %d, X's %d", token(t, w.Lock(name), g.ctx), xToken)
	case <-time.After(subDelay + 700*time.Millisecond - leaseW):
	}
	assert.Equal(t, 1, queueLen(t, srv, key), "W waits behind X")
	faults.SetDelay(redistest.SubscriberConn, 0)
	unlocked := time.Now()
	require.NoError(t, x.Lock(name).Unlock(xctx))
	wctx := mustGet(t, got, 5*time.Second)
	t.Logf("hand-off from X to W: %v", time.Since(unlocked))
	assert.Less(t, time.Since(unlocked), 2*time.Second, "the hand-off took the fallback")
	assert.Greater(t, token(t, w.Lock(name), wctx), xToken)
	assertHeldBy(t, srv.Client(), key, ownerField(t, w, wctx), 1)
	require.NoError(t, w.Lock(name).Unlock(wctx))
}

// H (30 s watchdog lease) hands the lock to W1, whose lease is 300 ms; a
// waiter W2 whose process was killed and W3 are queued behind it. Every
// queued waiter slept on H's lease, and when W1's runs out nothing is
// published (a Lock's or WriteLock's queue goes with the hash). W3 must
// have the lock within a moment of W1's lease end, not at its fallback
// (20 s or more).
func TestNoOversleepAfterHandOverToShorterLease(t *testing.T) {
	bin := buildHolder(t)
	flags := map[string]string{"Lock": "lock", "FairLock": "fair", "WriteLock": "write"}
	eachKind(t, func(t *testing.T, k lockKind) {
		srv := redistest.Start(t)
		rdb := srv.Client()
		name := "shorter-" + k.name
		const leaseW1 = 300 * time.Millisecond
		h := relock.New(rdb)
		c1 := relock.New(srv.Client())
		c3 := relock.New(srv.Client(), farWaiter...)
		t.Cleanup(func() { _ = h.Close(); _ = c1.Close(); _ = c3.Close() })
		key := k.keyOf(h, name)
		hctx, err := k.open(h, name).Lock(context.Background())
		require.NoError(t, err)

		got1 := make(chan granted, 1)
		go func() {
			ctx, err := k.open(c1, name).TryLock(context.Background(), relock.WaitForever, leaseW1)
			got1 <- granted{ctx, err}
		}()
		require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 1 }, 5*time.Second, time.Millisecond)
		proc, _, exited := startHolderProcess(t, bin, "-addr", srv.Addr(), "-name", name, "-kind", flags[k.name])
		require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 2 }, 10*time.Second, time.Millisecond)
		got3 := lockAsync(k.open(c3, name))
		require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 3 }, 5*time.Second, time.Millisecond)
		require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
		<-exited
		require.Eventually(t, func() bool {
			chans, err := rdb.PubSubChannels(context.Background(), key+":w:*").Result()
			return err == nil && len(chans) == 2
		}, 5*time.Second, time.Millisecond, "the killed waiter's subscription is gone")

		unlocked := time.Now()
		require.NoError(t, k.open(h, name).Unlock(hctx))
		ctx1 := mustGet(t, got1, 2*time.Second)
		ctx3 := mustGet(t, got3, 10*time.Second)
		elapsed := time.Since(unlocked)
		t.Logf("%s: W3 got the lock %v after H's release (W1's lease %v)", k.name, elapsed, leaseW1)
		assert.Less(t, elapsed, leaseW1+2*time.Second, "W3 overslept W1's lease")
		assert.ErrorIs(t, context.Cause(ctx1), relock.ErrLockLost, "W1's lease ran out")
		require.NoError(t, k.open(c3, name).Unlock(ctx3))
	})
}

// WithReplicas applies to a hold granted by a hand-over: on a master with no
// replica, a Lock that waits and is handed the lock fails with
// ErrNotReplicated, as an uncontended one does, sends its WAIT, and leaves
// the lock free.
func TestWithReplicasCoversAHandOver(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		srv := redistest.Start(t)
		rdb := srv.Client()
		name := "replicas-handover-" + k.name
		h := relock.New(rdb)
		w := relock.New(srv.Client(), relock.WithReplicas(1, 100*time.Millisecond))
		t.Cleanup(func() { _ = h.Close(); _ = w.Close() })
		key := k.keyOf(h, name)
		hctx, err := k.open(h, name).Lock(context.Background())
		require.NoError(t, err)
		got := lockAsync(k.open(w, name))
		require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 1 }, 5*time.Second, time.Millisecond)

		before := lockCommands(t, srv)["wait"]
		require.NoError(t, k.open(h, name).Unlock(hctx))
		select {
		case g := <-got:
			require.ErrorIs(t, g.err, relock.ErrNotReplicated)
			assert.ErrorIs(t, g.err, relock.ErrNotObtained)
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was stranded")
		}
		assert.Greater(t, lockCommands(t, srv)["wait"], before, "the hand-over's claim sent its WAIT")
		assert.Empty(t, k.state(t, rdb, key), "the unreplicated grant was taken back")
	})
}

// restoredSnapshot plays the scenario of a failover to a replica that
// missed writes, on one server: H1 holds name (of kind k) and W (Client cw)
// waits behind it; SAVE; H1's hold is force-released (by an operator's
// Client, so that H1's own Client does not hear of it), W is handed the lock
// and unlocks, X takes it and unlocks; then the server restarts from the
// snapshot, where H1 holds again with W queued. It returns the highest
// token handed out before the restart.
func restoredSnapshot(t *testing.T, srv *redistest.Server, k lockKind, h1, cw *relock.Client, name string) int64 {
	t.Helper()
	ctx := context.Background()
	rdb := srv.Client()
	op := relock.New(srv.Client())
	x := relock.New(srv.Client())
	defer func() { _ = op.Close(); _ = x.Close() }()
	key := k.keyOf(h1, name)
	got := lockAsync(k.open(cw, name))
	require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, rdb.Save(ctx).Err())

	forced, err := forceUnlock(k, op, name)
	require.NoError(t, err)
	require.True(t, forced)
	wctx := mustGet(t, got, 5*time.Second)
	last := token(t, k.open(cw, name), wctx)
	require.NoError(t, k.open(cw, name).Unlock(wctx))
	xctx, err := k.open(x, name).Lock(ctx)
	require.NoError(t, err)
	xToken := token(t, k.open(x, name), xctx)
	require.Greater(t, xToken, last)
	require.NoError(t, k.open(x, name).Unlock(xctx))

	srv.Restart() // SIGKILL, then a start that loads the SAVEd snapshot
	require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 1 }, 5*time.Second, 10*time.Millisecond,
		"the snapshot holds H1's hold and W's place")
	return xToken
}

// forceUnlock is ForceUnlock of the lock of kind k called name on c.
func forceUnlock(k lockKind, c *relock.Client, name string) (bool, error) {
	switch k.name {
	case "FairLock":
		return c.FairLock(name).ForceUnlock(context.Background())
	case "WriteLock":
		return c.RWLock(name).WriteLock().ForceUnlock(context.Background())
	}
	return c.Lock(name).ForceUnlock(context.Background())
}

// After Redis comes back with older state (the scenario of restoredSnapshot),
// a hand-over's token is above every token handed out before, as any other
// grant's is: never the freed hold's token + 1, which W had already. Lock and
// FairLock through a force release. (A holder whose Client still believes
// in the hold the snapshot brought back needs the force release's message
// to H1 lost; its Client is told at once now, so that case is not built
// here.)
func TestHandOverTokenAfterRedisRestoresOlderState(t *testing.T) {
	for _, k := range exclusiveKinds[:2] {
		t.Run(k.name+"/ForceUnlock", func(t *testing.T) {
			srv := redistest.Start(t)
			name := "restored-" + k.name
			h1 := relock.New(srv.Client())
			y := relock.New(srv.Client())
			t.Cleanup(func() { _ = h1.Close(); _ = y.Close() })
			_, err := k.open(h1, name).Lock(context.Background())
			require.NoError(t, err)
			xToken := restoredSnapshotWithout(t, srv, k, h1, name)

			got := lockAsync(k.open(y, name))
			key := k.keyOf(y, name)
			require.Eventually(t, func() bool { return queuedWaiters(t, srv.Client(), k, key) == 2 }, 5*time.Second, time.Millisecond)
			forced, err := forceUnlock(k, h1, name) // not Y's Client: see TestForceUnlockSparesTheHoldItHandsToItsOwnClientsWaiter
			require.NoError(t, err)
			require.True(t, forced)
			yctx := mustGet(t, got, 2*time.Second)
			assert.Greater(t, token(t, k.open(y, name), yctx), xToken, "the hand-over repeated or went below a token")
			require.NoError(t, k.open(y, name).Unlock(yctx))
		})
	}
}

// restoredSnapshotWithout is restoredSnapshot with W's Client closed once
// the snapshot is back: W's restored place is skipped, as a dead waiter's.
func restoredSnapshotWithout(t *testing.T, srv *redistest.Server, k lockKind, h1 *relock.Client, name string) int64 {
	t.Helper()
	cw := relock.New(srv.Client())
	defer func() { _ = cw.Close() }()
	return restoredSnapshot(t, srv, k, h1, cw, name)
}

// After the same fault, the restored queue lists W, whose Client is alive
// and still listens on the lock's channel for Y, its other waiter. A force
// release hands the lock to W's old id: the Client must release that grant
// at once (nobody waits under that id), so that Y has the lock within a
// moment, not after W's 30 s lease.
func TestGrantToAWaiterThatLeftIsReleasedAtOnce(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		srv := redistest.Start(t)
		name := "stray-" + k.name
		h1 := relock.New(srv.Client())
		cw := relock.New(srv.Client())
		t.Cleanup(func() { _ = h1.Close(); _ = cw.Close() })
		_, err := k.open(h1, name).Lock(context.Background())
		require.NoError(t, err)
		xToken := restoredSnapshot(t, srv, k, h1, cw, name)

		got := lockAsync(k.open(cw, name)) // Y, in W's Client
		key := k.keyOf(cw, name)
		require.Eventually(t, func() bool { return queuedWaiters(t, srv.Client(), k, key) == 2 }, 5*time.Second, time.Millisecond)
		forced, err := forceUnlock(k, h1, name)
		require.NoError(t, err)
		require.True(t, forced)
		start := time.Now()
		yctx := mustGet(t, got, 5*time.Second)
		t.Logf("%s: Y got the lock %v after the force release", k.name, time.Since(start))
		assert.Less(t, time.Since(start), 2*time.Second, "the stray grant held the lock for its lease")
		assert.Greater(t, token(t, k.open(cw, name), yctx), xToken)
		assertHolders(t, k, srv.Client(), key, ownerField(t, cw, yctx))
		require.NoError(t, k.open(cw, name).Unlock(yctx))
	})
}

// assertHolders checks that owner alone holds the lock of kind k at key.
func assertHolders(t *testing.T, k lockKind, rdb redis.UniversalClient, key, owner string) {
	t.Helper()
	assert.Equal(t, map[string]string{owner: "1"}, k.state(t, rdb, key))
}

// A duplicate of a grant the waiter already claimed reaches its Client after
// the hold is recorded: it names a generation the Client holds, so it must
// not be released as a stray.
func TestDuplicateOfAClaimedGrantKeepsTheHold(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		srv := redistest.Start(t)
		rdb := srv.Client()
		name := "duplicate-" + k.name
		h := relock.New(rdb)
		w := relock.New(srv.Client())
		t.Cleanup(func() { _ = h.Close(); _ = w.Close() })
		key := k.keyOf(h, name)
		spy := srv.Client().PSubscribe(context.Background(), key+":w:*")
		t.Cleanup(func() { _ = spy.Close() })
		_, err := spy.Receive(context.Background())
		require.NoError(t, err)

		hctx, err := k.open(h, name).Lock(context.Background())
		require.NoError(t, err)
		got := lockAsync(k.open(w, name))
		require.Eventually(t, func() bool { return queuedWaiters(t, rdb, k, key) == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, k.open(h, name).Unlock(hctx))
		wctx := mustGet(t, got, 2*time.Second)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		msg, err := spy.ReceiveMessage(rctx)
		require.NoError(t, err)
		require.Contains(t, msg.Payload, " ", "the grant")

		require.NoError(t, rdb.Publish(context.Background(), msg.Channel, msg.Payload).Err())
		// Nothing signals that a message changed nothing: give the stray
		// release, were it run, ample time to reach Redis.
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, wctx.Err(), "the hold survives its grant's duplicate")
		assertHolders(t, k, rdb, key, ownerField(t, w, wctx))
		require.NoError(t, k.open(w, name).Unlock(wctx))
	})
}
