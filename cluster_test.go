package relock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// TestCluster runs every exclusive lock type on one real Redis Cluster of 3
// masters and 3 replicas, shared by the subtests: starting a cluster takes
// seconds, and the subtests use distinct lock names.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	masters, err := cl.Masters(context.Background())
	require.NoError(t, err)
	require.Len(t, masters, 3)

	eachKind(t, func(t *testing.T, k lockKind) {
		t.Run("LockUnlockAnyName", func(t *testing.T) { testClusterAnyName(t, cl, k) })
		t.Run("WaitersWoken", func(t *testing.T) { testClusterWaiters(t, cl, k) })
		t.Run("WatchdogRenewsOnEveryNode", func(t *testing.T) { testClusterWatchdog(t, cl, k) })
		t.Run("MutualExclusion", func(t *testing.T) { testClusterCounter(t, cl, k) })
		t.Run("WaitOnTheLocksMaster", func(t *testing.T) { testClusterReplicas(t, cl, k) })
	})
	t.Run("ReadersAndWriter", func(t *testing.T) { testClusterReadLock(t, cl) })
	t.Run("MultiLockAcrossSlots", func(t *testing.T) { testClusterMultiLock(t, cl) })
	t.Run("MultiLockWaitsOnEachMaster", func(t *testing.T) { testClusterMultiLockReplicas(t, cl) })
	t.Run("LostHoldIsReported", func(t *testing.T) { testClusterLost(t, cl) })
	// Last: it kills a master, which changes the topology for good.
	t.Run("MasterFailover", func(t *testing.T) { testClusterFailover(t, cl) })
}

// nodeClients returns a plain client per node address, for asking one node
// directly what it holds.
func nodeClients(t *testing.T, cl *redistest.Cluster) map[string]*redis.Client {
	out := make(map[string]*redis.Client)
	for _, s := range cl.Nodes {
		out[s.Addr()] = s.Client()
	}
	return out
}

// namesPerMaster returns n lock names (with the given stem) whose keys live
// on each master, keyed by master address.
func namesPerMaster(t *testing.T, cl *redistest.Cluster, c *relock.Client, k lockKind, stem string, n int) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := make(map[string][]string)
	for i := 0; ; i++ {
		name := stem + strconv.Itoa(i)
		m, err := cl.MasterOf(ctx, k.keyOf(c, name))
		require.NoError(t, err)
		if len(out[m.Addr()]) < n {
			out[m.Addr()] = append(out[m.Addr()], name)
		}
		done := len(out) == 3
		for _, names := range out {
			done = done && len(names) == n
		}
		if done {
			return out
		}
		require.Less(t, i, 10000, "names do not spread over the masters")
	}
}

func testClusterAnyName(t *testing.T, cl *redistest.Cluster, k lockKind) {
	ctx := context.Background()
	rdb := cl.Client()
	nodes := nodeClients(t, cl)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })

	names := []string{
		"orders", "a{b", "a}b", "}{", "{", "}", "{}", "{tag}rest", "x{tag}", "%7B", "%", "ü{ñ}",
		strings.Repeat("long{name}", 6000), // 60 kB, braces all the way
	}
	used := make(map[string]bool)
	for _, name := range names {
		l := k.open(c, name)
		key := k.keyOf(c, name)
		hold, err := l.Lock(ctx)
		require.NoError(t, err, "no CROSSSLOT or other error for %.40q", name)
		inner, err := l.Lock(hold)
		require.NoError(t, err)

		// The hash (with its token) and, once released, the tail sit on
		// the master of the key's slot.
		master, err := cl.MasterOf(ctx, key)
		require.NoError(t, err)
		used[master.Addr()] = true
		node := nodes[master.Addr()]
		assert.Equal(t, map[string]string{ownerField(t, c, hold): "2"}, k.state(t, node, key), "%.40q", name)
		assert.Greater(t, pttl(t, node, key), time.Duration(0))
		tok, err := l.Token(inner)
		require.NoError(t, err)
		stored, err := node.HGet(ctx, key, "~t").Int64()
		require.NoError(t, err, "the token is kept in the lock's hash on its node")
		assert.Equal(t, stored, tok)

		require.NoError(t, l.Unlock(inner))
		require.NoError(t, l.Unlock(hold))
		assert.Empty(t, k.state(t, rdb, key))
		assert.ErrorIs(t, context.Cause(hold), relock.ErrUnlocked)
		assert.Equal(t, tok, tailOf(t, node, tailKey(key), defaultLatch), "the tail is on the lock's node")
	}
	assert.Len(t, used, 3, "the names must exercise every master")
}

// The watchdog renews holds whose keys live on different nodes, in one
// pipeline per tick (go-redis splits it per node).
func testClusterWatchdog(t *testing.T, cl *redistest.Cluster, k lockKind) {
	ctx := context.Background()
	rdb := cl.Client()
	const lease = 900 * time.Millisecond
	c := relock.New(rdb, relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = c.Close() })

	perMaster := namesPerMaster(t, cl, c, k, k.name+"-dog-", 4)
	holds := make(map[string]context.Context)
	for _, names := range perMaster {
		for _, name := range names {
			hctx, err := k.open(c, name).Lock(ctx)
			require.NoError(t, err)
			holds[name] = hctx
		}
	}
	locked := time.Now()
	ticks0, trips0, _ := c.WatchdogStats()
	// Twice the lease: without renewals every key would be gone by now.
	require.Eventually(t, func() bool {
		ticks, _, _ := c.WatchdogStats()
		return ticks-ticks0 >= 6 && time.Since(locked) > 2*lease
	}, 10*time.Second, 10*time.Millisecond)
	ticks, trips, _ := c.WatchdogStats()
	// One pipeline per tick for holds on 3 nodes (give or take the tick in
	// flight when the counters were read).
	assert.InDelta(t, ticks-ticks0, trips-trips0, 1)
	for name, hctx := range holds {
		require.NoError(t, hctx.Err(), "%s lost", name)
		key := k.keyOf(c, name)
		assert.Equal(t, map[string]string{ownerField(t, c, hctx): "1"}, k.state(t, rdb, key))
		assert.Greater(t, pttl(t, rdb, key), lease/3, "renewed within the last interval")
	}
	for name, hctx := range holds {
		require.NoError(t, k.open(c, name).Unlock(hctx))
	}
	assert.Equal(t, 0, c.WatchedHolds())
}

// Goroutines in two processes increment a counter kept on the lock's node
// with a separate read and write: only mutual exclusion keeps every update.
func testClusterCounter(t *testing.T, cl *redistest.Cluster, k lockKind) {
	ctx := context.Background()
	rdb := cl.Client()
	clients := []*relock.Client{relock.New(rdb), relock.New(cl.Client())}
	for _, c := range clients {
		t.Cleanup(func() { _ = c.Close() })
	}
	name := k.name + "-counter"
	counter := name + ":n"
	const goroutines, rounds = 6, 8
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := k.open(clients[g%2], name)
			for range rounds {
				hctx, err := l.Lock(ctx)
				if !assert.NoError(t, err) {
					return
				}
				v, _ := rdb.Get(hctx, counter).Int()
				assert.NoError(t, rdb.Set(hctx, counter, v+1, 0).Err())
				assert.NoError(t, l.Unlock(hctx))
			}
		}()
	}
	wg.Wait()
	n, err := rdb.Get(ctx, counter).Int()
	require.NoError(t, err)
	assert.Equal(t, goroutines*rounds, n)
}

// WithReplicas sends its WAIT to the master that ran the acquire script,
// whichever node that is.
func testClusterReplicas(t *testing.T, cl *redistest.Cluster, k lockKind) {
	ctx := context.Background()
	c := relock.New(cl.Client(), relock.WithReplicas(1, time.Second))
	t.Cleanup(func() { _ = c.Close() })
	for addr, names := range namesPerMaster(t, cl, c, k, k.name+"-wait-", 1) {
		master, err := cl.MasterOf(ctx, k.keyOf(c, names[0]))
		require.NoError(t, err)
		require.Equal(t, addr, master.Addr())
		l := k.open(c, names[0])
		warm, err := l.Lock(ctx) // loads the script on that node
		require.NoError(t, err)
		require.NoError(t, l.Unlock(warm))
		before, err := redistest.CommandCalls(ctx, master.Client())
		require.NoError(t, err)
		hctx, err := l.Lock(ctx)
		require.NoError(t, err)
		after, err := redistest.CommandCalls(ctx, master.Client())
		require.NoError(t, err)
		assert.Equal(t, before["wait"]+1, after["wait"], "WAIT ran on %s, the lock's master", addr)
		require.NoError(t, l.Unlock(hctx))
	}
}

// A hold whose key disappears on its node is ended at the next renewal.
func testClusterLost(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	rdb := cl.Client()
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("cluster-lost")
	hctx, err := l.Lock(ctx)
	require.NoError(t, err)
	master, err := cl.MasterOf(ctx, l.Key())
	require.NoError(t, err)
	require.NoError(t, master.Client().Del(ctx, l.Key()).Err())
	c.WatchdogTick()
	<-hctx.Done()
	assert.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
	assert.ErrorIs(t, l.Unlock(hctx), relock.ErrLockLost)
}

// A master dies and its replica takes over: the waiter's subscription moves
// to the new master (go-redis re-subscribes, the confirmation makes it
// re-check), the holder's watchdog either keeps renewing on the new master
// or tells the holder it lost the lock, and the waiter gets the lock.
func testClusterFailover(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	const lease = 3 * time.Second
	holder := relock.New(cl.Client(), relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = holder.Close() })
	waiter := relock.New(cl.Client(), relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = waiter.Close() })

	l := holder.Lock("failover")
	hctx, err := l.Lock(ctx)
	require.NoError(t, err)
	tok, err := l.Token(hctx)
	require.NoError(t, err)
	old, err := cl.MasterOf(ctx, l.Key())
	require.NoError(t, err)
	// Let the hold reach the replica, as it would in a moment anyway.
	_, err = old.Client().Wait(ctx, 1, time.Second).Result()
	require.NoError(t, err)

	type got struct {
		ctx context.Context
		err error
	}
	result := make(chan got, 1)
	go func() {
		wctx, err := waiter.Lock("failover").Lock(ctx)
		result <- got{wctx, err}
	}()
	channel := l.Key() + ":w:" + waiter.ID()
	sharded := redistest.ShardedPubSub(ctx, cl.Client())
	subscribedOn := func(node *redistest.Server) bool {
		if sharded {
			return shardNumSub(t, node.Client(), channel) == 1
		}
		return liveNumSub(cl, channel) == 1 // classic: on whichever node
	}
	require.Eventually(t, func() bool { return subscribedOn(old) }, 5*time.Second, 5*time.Millisecond)

	old.Kill()
	require.NoError(t, cl.WaitHealthy(30*time.Second))
	promoted, err := cl.MasterOf(ctx, l.Key())
	require.NoError(t, err)
	require.NotEqual(t, old.Addr(), promoted.Addr())
	// The waiter's subscriber followed the slot to the promoted master, or
	// the waiter has the lock already (checked below).
	require.Eventually(t, func() bool { return len(result) > 0 || subscribedOn(promoted) }, 10*time.Second, 10*time.Millisecond)

	select {
	case r := <-result:
		// Only legitimate if the holder has been told it lost the lock.
		require.NoError(t, r.err)
		require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost, "two holders at once")
		require.NoError(t, waiter.Lock("failover").Unlock(r.ctx))
		return
	default:
	}
	// The hold survived on the promoted master: renewals reach it there.
	require.Eventually(t, func() bool {
		return pttl(t, promoted.Client(), l.Key()) > lease-lease/3+100*time.Millisecond || hctx.Err() != nil
	}, 2*lease, 10*time.Millisecond)
	if hctx.Err() == nil {
		h := assertHeldBy(t, promoted.Client(), l.Key(), ownerField(t, holder, hctx), 1)
		assert.Equal(t, tok, h.token, "the hold's token came over with it")
		require.NoError(t, l.Unlock(hctx))
	} else {
		require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
	}
	select {
	case r := <-result:
		require.NoError(t, r.err)
		wtok, err := waiter.Lock("failover").Token(r.ctx)
		require.NoError(t, err)
		assert.Greater(t, wtok, tok, "tokens keep increasing across the failover")
		require.NoError(t, waiter.Lock("failover").Unlock(r.ctx))
	case <-time.After(2 * lease):
		t.Fatal("the waiter was stranded by the failover")
	}
}

// Read locks on a Cluster: readers share, a writer waits for them and is
// woken through sharded pub/sub when the last one leaves.
func testClusterReadLock(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	c := relock.New(cl.Client())
	t.Cleanup(func() { _ = c.Close() })
	for _, name := range []string{"catalog", "a}b{c", strings.Repeat("{r}", 2000)} {
		rw := c.RWLock(name)
		r1, err := rw.ReadLock().Lock(ctx)
		require.NoError(t, err, "no CROSSSLOT for %.30q", name)
		r2, err := rw.ReadLock().Lock(ctx) // another owner, at the same time
		require.NoError(t, err)
		got := lockAsync(rw.WriteLock())
		require.Eventually(t, func() bool { return c.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
		mustNotGet(t, got)
		require.NoError(t, rw.ReadLock().Unlock(r1))
		mustNotGet(t, got)
		require.NoError(t, rw.ReadLock().Unlock(r2))
		w := mustGet(t, got, 5*time.Second)
		require.NoError(t, rw.WriteLock().Unlock(w))
		n, err := cl.Client().Exists(ctx, rw.Key()).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "%.30q: the lock's hash is gone", name)
	}
}

// A MultiLock over names spread across the masters: all parts are taken and
// released (one script call per slot), and a second owner waits for them.
func testClusterMultiLock(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	c := relock.New(cl.Client())
	t.Cleanup(func() { _ = c.Close() })
	other := relock.New(cl.Client())
	t.Cleanup(func() { _ = other.Close() })
	perMaster := namesPerMaster(t, cl, c, exclusiveKinds[0], "multi", 2)
	var names []string
	for _, ns := range perMaster {
		names = append(names, ns...)
	}
	parts := func(c *relock.Client) []*relock.Lock {
		var ls []*relock.Lock
		for _, n := range names {
			ls = append(ls, c.Lock(n))
		}
		return ls
	}
	m := relock.NewMultiLock(parts(c)...)
	hctx, err := m.Lock(ctx)
	require.NoError(t, err, "no CROSSSLOT")
	rdb := cl.Client()
	for _, n := range names {
		assertHeldBy(t, rdb, c.Lock(n).Key(), ownerField(t, c, hctx), 1, n)
	}

	done := make(chan error, 1)
	go func() {
		octx, err := relock.NewMultiLock(parts(other)...).Lock(ctx)
		if err == nil {
			err = relock.NewMultiLock(parts(other)...).Unlock(octx)
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return other.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("second MultiLock got in while held: %v", err)
	default:
	}
	require.NoError(t, m.Unlock(hctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting MultiLock was not woken")
	}
	for _, n := range names {
		assert.Empty(t, hgetall(t, rdb, c.Lock(n).Key()), n)
	}
	for _, node := range nodeClients(t, cl) {
		if role, err := node.Do(ctx, "role").Slice(); err == nil && role[0] == "master" {
			for _, k := range heldKeys(t, node, defaultLatch) {
				assert.False(t, strings.HasPrefix(k, "relock:{multi"), "%s is left: only tails and latches may be", k)
			}
		}
	}
}
