package relock

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// The fault tests of the subscriber: after each fault, a waiter whose
// wake-up was lost must get the lock within maxHandOff of the unlock. The
// holders keep the default 30 s watchdog lease, so a waiter that only got in
// through the lease fallback fails them.
const maxHandOff = 2 * time.Second

// handOff waits for the waiter that must get the lock unlocked at since,
// fails the test if it takes maxHandOff or more, and returns the time it took.
func handOff(t *testing.T, got <-chan lockResult, since time.Time, what string) lockResult {
	t.Helper()
	select {
	case r := <-got:
		require.NoError(t, r.err, what)
		d := r.at.Sub(since)
		t.Logf("%s: hand-off %v", what, d.Round(time.Millisecond))
		require.Less(t, d, maxHandOff, "%s: the waiter was not woken (lease fallback)", what)
		return r
	case <-time.After(maxHandOff + time.Second):
		t.Fatalf("%s: no hand-off %v after the unlock: the wake-up was lost", what, maxHandOff+time.Second)
		return lockResult{}
	}
}

// asleep waits until one waiter of c sleeps on channel with its subscription
// confirmed by Redis.
func asleep(t *testing.T, c *Client, channel string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c.subs.mu.Lock()
		defer c.subs.mu.Unlock()
		st := c.subs.chans[channel]
		return st != nil && st.confirmed && st.queue.Len() == 1
	}, 10*time.Second, time.Millisecond, "no confirmed waiter on %s", channel)
}

// The half-open subscriber connection: traffic on it is silently dropped
// (a dead NAT entry), new connections work. The health check must notice
// that the PING gets no answer, replace the connection, re-subscribe and make
// the waiter re-check: the unlock whose message was dropped is handed off
// in about healthInterval+pongTimeout, not after the holder's lease.
func TestSubscriberHalfOpenConnection(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	// The waiter's commands go through the proxy too; its pooled connection
	// would be blackholed as well and stall its attempt for a read timeout.
	// Idle pooled connections are dropped quickly so that this test measures
	// the subscriber, not go-redis's command pool.
	waiterRDB := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ConnMaxIdleTime: 50 * time.Millisecond})
	t.Cleanup(func() { _ = waiterRDB.Close() })
	waiter := New(waiterRDB)
	t.Cleanup(func() { _ = waiter.Close() })
	holder := New(srv.Client())
	t.Cleanup(func() { _ = holder.Close() })

	for round := range 2 {
		l := holder.Lock("half-open")
		hctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		got := lockAsync(waiter.Lock("half-open"))
		asleep(t, waiter, waiter.Lock(l.Name()).keys.waitChannel)
		accepted := proxy.Accepted()

		proxy.Blackhole()
		if round == 1 {
			// Silence first: the unlock comes while the PING is unanswered.
			time.Sleep(healthInterval)
		}
		unlocked := time.Now()
		require.NoError(t, l.Unlock(hctx))
		r := handOff(t, got, unlocked, fmt.Sprintf("round %d", round))
		require.NoError(t, waiter.Lock("half-open").Unlock(r.ctx))
		assert.Greater(t, proxy.Accepted(), accepted, "the subscriber opened a new connection")
		proxy.Unblackhole()
	}
}

// While a Client holds locks the engine keeps a presence subscription
// (keepAlive), so that a Redis restart or death is noticed at once through
// the broken connection: recheckHolds runs within a second, and again when
// the connection is back, with the presence channel subscribed again.
func TestPresenceNoticesRestart(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	c.subs.keepAlive()
	c.subs.keepAlive() // idempotent
	channel := defaultKeyPrefix + ":client:" + c.ID()
	admin := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	subscribed := func() bool {
		n, err := admin.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && n[channel] == 1
	}
	require.Eventually(t, subscribed, 5*time.Second, time.Millisecond)
	assert.Equal(t, 0, c.SubscribedChannels(), "the presence channel is no waiter's")

	for _, fault := range []struct {
		name string
		down time.Duration
	}{{"restart", 0}, {"down 1.5 s", 1500 * time.Millisecond}} {
		n := c.subs.rechecks()
		start := time.Now()
		srv.Kill()
		require.Eventually(t, func() bool { return c.subs.rechecks() > n }, time.Second, time.Millisecond,
			"%s: recheckHolds not called within 1 s of the kill", fault.name)
		t.Logf("%s: recheckHolds %v after the kill", fault.name, time.Since(start).Round(time.Millisecond))
		time.Sleep(fault.down)
		srv.Restart()
		back := time.Now()
		require.Eventually(t, func() bool { return subscribed() && c.subs.rechecks() >= n+2 }, maxHandOff, time.Millisecond,
			"%s: presence not subscribed again, or no recheckHolds on the reconnect", fault.name)
		t.Logf("%s: subscribed again %v after the restart", fault.name, time.Since(back).Round(time.Millisecond))
	}

	require.NoError(t, c.Close())
	require.Eventually(t, func() bool {
		n, err := admin.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && n[channel] == 0
	}, 5*time.Second, time.Millisecond, "Close ends the presence subscription")
}

// Redis is down for 2 s. The subscriber retries with exponential backoff
// (not every 100 ms), logs one Warn for the outage and one Info when it is
// back, tells the Observer once, and the sleeping waiter gets the lock as
// soon as it is back.
func TestSubscriberOutageBacksOffAndLogsOnce(t *testing.T) {
	srv := redistest.Start(t)
	var dials atomic.Int64
	waiterRDB := redis.NewClient(&redis.Options{
		Addr:          srv.Addr(),
		DialerRetries: 1, // one dial per reconnect attempt, so dials count attempts
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { _ = waiterRDB.Close() })
	logs := &countingHandler{}
	var events []SubscriberEvent
	var evMu sync.Mutex
	// Deadlock detection off: the dials counted are the subscriber's and
	// the waiter's attempts (detection's checks back off on their own).
	waiter := New(waiterRDB, WithDeadlockDetection(0), WithLogger(slog.New(logs)), WithObserver(&Observer{
		SubscriberReconnected: func(e SubscriberEvent) {
			evMu.Lock()
			events = append(events, e)
			evMu.Unlock()
		},
	}))
	t.Cleanup(func() { _ = waiter.Close() })
	holderRDB := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	holder := New(holderRDB)
	t.Cleanup(func() { _ = holder.Close() })

	l := holder.Lock("outage")
	_, err := l.Lock(context.Background())
	require.NoError(t, err)
	got := lockAsync(waiter.Lock("outage"))
	asleep(t, waiter, waiter.Lock(l.Name()).keys.waitChannel)

	srv.Kill()
	before := dials.Load()
	const outage = 2 * time.Second
	time.Sleep(outage)
	attempts := dials.Load() - before
	restarted := time.Now()
	srv.Restart() // empty: the lock is free
	// The next attempt is due at 3.1 s (after 0, 0.1, 0.3, 0.7, 1.5).
	r := handOff(t, got, restarted, "after the restart")
	require.NoError(t, waiter.Lock("outage").Unlock(r.ctx))

	t.Logf("%d reconnect attempts in %v", attempts, outage)
	// 0, 0.1, 0.3, 0.7, 1.5 s: five, give or take; every 100 ms is twenty.
	assert.LessOrEqual(t, attempts, int64(8), "reconnects do not back off")
	assert.GreaterOrEqual(t, attempts, int64(3), "gave up reconnecting")
	assert.Equal(t, 1, logs.Count(slog.LevelWarn, "subscriber"), "one Warn per outage")
	require.Eventually(t, func() bool { return logs.Count(slog.LevelInfo, "subscriber") == 1 }, time.Second, time.Millisecond,
		"one Info on recovery")
	evMu.Lock()
	defer evMu.Unlock()
	assert.GreaterOrEqual(t, waiter.subs.rechecks(), int64(2), "recheckHolds on the loss and on the recovery")
	require.Len(t, events, 1)
	assert.Equal(t, "", events[0].Shard)
	assert.Greater(t, events[0].Down, outage-time.Second)
	assert.Error(t, events[0].Err)
}

// clusterMap returns the master address of every slot.
func clusterMap(t *testing.T, cl *redistest.Cluster) map[int]string {
	t.Helper()
	slots, err := cl.Client().ClusterSlots(context.Background()).Result()
	require.NoError(t, err)
	m := make(map[int]string)
	for _, s := range slots {
		for i := s.Start; i <= s.End; i++ {
			m[i] = s.Nodes[0].Addr
		}
	}
	return m
}

// namesOn returns n lock names whose keys live on master, each in a slot of
// its own.
func namesOn(t *testing.T, cl *redistest.Cluster, c *Client, master string, stem string, n int) []string {
	t.Helper()
	slots := clusterMap(t, cl)
	used := map[int]bool{}
	var out []string
	for i := 0; len(out) < n; i++ {
		require.Less(t, i, 100000)
		name := stem + strconv.Itoa(i)
		slot := slotOf(c.Lock(name).Key())
		if slots[slot] == master && !used[slot] {
			used[slot] = true
			out = append(out, name)
		}
	}
	return out
}

func nodeByAddr(t *testing.T, cl *redistest.Cluster, addr string) *redistest.Server {
	t.Helper()
	for _, s := range cl.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	t.Fatalf("no node at %s", addr)
	return nil
}

// replicaOf returns the replica of master.
func replicaOf(t *testing.T, cl *redistest.Cluster, master *redistest.Server) *redistest.Server {
	t.Helper()
	for _, s := range cl.Nodes {
		info, err := redistest.Info(context.Background(), s.Client(), "replication")
		require.NoError(t, err)
		if info["role"] == "slave" && info["master_port"] == strconv.Itoa(master.Port()) {
			return s
		}
	}
	t.Fatalf("%s has no replica", master.Addr())
	return nil
}

func shardNumSubOf(t *testing.T, node *redistest.Server, channel string) int64 {
	t.Helper()
	m, err := node.Client().PubSubShardNumSub(context.Background(), channel).Result()
	require.NoError(t, err)
	return m[channel]
}

func nodeID(t *testing.T, s *redistest.Server) string {
	t.Helper()
	id, err := s.Client().ClusterMyID(context.Background()).Result()
	require.NoError(t, err)
	return id
}

// The Cluster faults of the subscriber, on one cluster of 3 masters with a
// replica each (starting one takes seconds). Each subtest waits on locks of
// one master, breaks the subscription in its own way, unlocks and measures
// the hand-off.
func TestClusterSubscriberFaults(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	masters, err := cl.Masters(context.Background())
	require.NoError(t, err)
	require.Len(t, masters, 3)

	t.Run("NoPresenceOnCluster", func(t *testing.T) {
		c := New(cl.Client())
		t.Cleanup(func() { _ = c.Close() })
		c.subs.keepAlive()
		c.subs.mu.Lock()
		defer c.subs.mu.Unlock()
		assert.Nil(t, c.subs.presence)
		assert.Empty(t, c.subs.shards)
	})
	// The faults of shard channels, which servers without sharded pub/sub
	// (Redis 6.2) do not have: relock uses classic pub/sub there.
	if !redistest.ShardedPubSub(context.Background(), cl.Client()) {
		t.Skip("the server has no sharded pub/sub (SSUBSCRIBE): no shard channel to break")
	}
	t.Run("ReconnectSubscribesPerSlot", func(t *testing.T) { testClusterReconnect(t, cl, masters[0]) })
	t.Run("ManualFailover", func(t *testing.T) { testClusterManualFailover(t, cl, masters[1]) })
	t.Run("SlotMigration", func(t *testing.T) { testClusterSlotMigration(t, cl, masters[2], masters[0]) })
}

// The subscriber connection to one master, which carries channels of several
// slots, is killed. It must come back with every channel subscribed (one
// SSUBSCRIBE per slot: one across slots is refused with CROSSSLOT), and every
// waiter woken: the unlocks made while it was down were lost.
func testClusterReconnect(t *testing.T, cl *redistest.Cluster, master *redistest.Server) {
	ctx := context.Background()
	holder := New(cl.Client())
	t.Cleanup(func() { _ = holder.Close() })
	waiter := New(cl.Client())
	t.Cleanup(func() { _ = waiter.Close() })

	names := namesOn(t, cl, holder, master.Addr(), "reconnect-", 4)
	holds := make([]context.Context, len(names))
	gots := make([]<-chan lockResult, len(names))
	for i, name := range names {
		var err error
		holds[i], err = holder.Lock(name).Lock(ctx)
		require.NoError(t, err)
		gots[i] = lockAsync(waiter.Lock(name))
		asleep(t, waiter, waiter.Lock(name).keys.waitChannel)
	}
	for _, name := range names {
		require.EqualValues(t, 1, shardNumSubOf(t, master, waiter.Lock(name).keys.waitChannel))
	}

	rechecks := waiter.subs.rechecks()
	require.NoError(t, master.Client().Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	// Two unlocks at once (their messages are lost with the connection), two
	// once the subscriber is back.
	for i := range 2 {
		unlocked := time.Now()
		require.NoError(t, holder.Lock(names[i]).Unlock(holds[i]))
		r := handOff(t, gots[i], unlocked, names[i]+" (unlocked while down)")
		require.NoError(t, waiter.Lock(names[i]).Unlock(r.ctx))
	}
	// What the subscriber believes is what Redis has.
	for _, name := range names[2:] {
		ch := waiter.Lock(name).keys.waitChannel
		require.Eventually(t, func() bool { return shardNumSubOf(t, master, ch) == 1 }, maxHandOff, time.Millisecond,
			"%s is not subscribed again", ch)
		asleep(t, waiter, ch)
	}
	assert.GreaterOrEqual(t, waiter.subs.rechecks(), rechecks+2, "recheckHolds on the loss and on the reconnect")
	for i := 2; i < len(names); i++ {
		unlocked := time.Now()
		require.NoError(t, holder.Lock(names[i]).Unlock(holds[i]))
		r := handOff(t, gots[i], unlocked, names[i]+" (unlocked after)")
		require.NoError(t, waiter.Lock(names[i]).Unlock(r.ctx))
	}
}

// CLUSTER FAILOVER on the replica: no connection drops, the demoted master
// ends its shard subscriptions with an sunsubscribe push. The subscriber must
// follow the slot to the promoted master and wake its waiters: one lock is
// unlocked at once (its message may be lost), one once the subscriber has
// moved.
func testClusterManualFailover(t *testing.T, cl *redistest.Cluster, master *redistest.Server) {
	ctx := context.Background()
	holder := New(cl.Client())
	t.Cleanup(func() { _ = holder.Close() })
	waiter := New(cl.Client())
	t.Cleanup(func() { _ = waiter.Close() })
	replica := replicaOf(t, cl, master)
	names := namesOn(t, cl, holder, master.Addr(), "failover-", 2)
	before := waiter.subs.rechecks()

	holds, gots := holdAndWait(t, holder, waiter, names)
	// A manual failover that the master does not acknowledge in time
	// (a loaded machine) is aborted by Redis: it is asked again.
	promoted := func() bool {
		info, err := redistest.Info(ctx, replica.Client(), "replication")
		return err == nil && info["role"] == "master"
	}
	for try := 0; try < 3 && !promoted(); try++ {
		require.NoError(t, replica.Client().Do(ctx, "CLUSTER", "FAILOVER").Err())
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && !promoted() {
			time.Sleep(5 * time.Millisecond)
		}
	}
	require.True(t, promoted(), "the replica was not promoted")
	moved(t, holder, waiter, names, holds, gots, master, replica, "after CLUSTER FAILOVER")
	assert.Greater(t, waiter.subs.rechecks(), before, "recheckHolds after the failover")
}

// holdAndWait takes each lock with holder and starts a waiter of waiter on
// each, and waits until they sleep.
func holdAndWait(t *testing.T, holder, waiter *Client, names []string) ([]context.Context, []<-chan lockResult) {
	t.Helper()
	holds := make([]context.Context, len(names))
	gots := make([]<-chan lockResult, len(names))
	for i, name := range names {
		var err error
		holds[i], err = holder.Lock(name).Lock(context.Background())
		require.NoError(t, err)
		gots[i] = lockAsync(waiter.Lock(name))
		asleep(t, waiter, waiter.Lock(name).keys.waitChannel)
	}
	return holds, gots
}

// moved checks the hand-offs after the locks' slot moved from one master to
// another: the first lock is unlocked at once, the second once the waiter's
// subscription is on the new master and nowhere else.
func moved(t *testing.T, holder, waiter *Client, names []string, holds []context.Context, gots []<-chan lockResult,
	from, to *redistest.Server, what string) {
	t.Helper()
	unlocked := time.Now()
	require.NoError(t, holder.Lock(names[0]).Unlock(holds[0]))
	r := handOff(t, gots[0], unlocked, what+", unlocked at once")
	require.NoError(t, waiter.Lock(names[0]).Unlock(r.ctx))

	ch := waiter.Lock(names[1]).keys.waitChannel
	require.Eventually(t, func() bool { return shardNumSubOf(t, to, ch) == 1 }, maxHandOff, time.Millisecond,
		"%s: not subscribed on the new master", what)
	assert.EqualValues(t, 0, shardNumSubOf(t, from, ch), "%s: still subscribed on the old master", what)
	asleep(t, waiter, ch)
	unlocked = time.Now()
	require.NoError(t, holder.Lock(names[1]).Unlock(holds[1]))
	r = handOff(t, gots[1], unlocked, what+", unlocked after the move")
	require.NoError(t, waiter.Lock(names[1]).Unlock(r.ctx))
}

// The slot of two locks on which waiters sleep moves to another master: the
// old master ends the subscriptions (sunsubscribe), and the subscriber must
// subscribe on the new one and wake the waiters.
func testClusterSlotMigration(t *testing.T, cl *redistest.Cluster, from, to *redistest.Server) {
	ctx := context.Background()
	holder := New(cl.Client())
	t.Cleanup(func() { _ = holder.Close() })
	waiter := New(cl.Client())
	t.Cleanup(func() { _ = waiter.Close() })

	// Two names of one slot of from.
	slots := clusterMap(t, cl)
	seen := map[int]string{}
	var names []string
	for i := 0; names == nil; i++ {
		require.Less(t, i, 100000)
		name := "migrate-" + strconv.Itoa(i)
		slot := slotOf(holder.Lock(name).Key())
		if slots[slot] != from.Addr() {
			continue
		}
		if other, ok := seen[slot]; ok {
			names = []string{other, name}
		}
		seen[slot] = name
	}
	slot := slotOf(holder.Lock(names[0]).Key())
	holds, gots := holdAndWait(t, holder, waiter, names)

	fromID, toID := nodeID(t, from), nodeID(t, to)
	require.NoError(t, to.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Err())
	require.NoError(t, from.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err())
	keys, err := from.Client().ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	args := []any{"MIGRATE", "127.0.0.1", to.Port(), "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	require.NoError(t, from.Client().Do(ctx, args...).Err())
	require.NoError(t, to.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err())
	require.NoError(t, from.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err())
	for _, s := range cl.Nodes {
		if s != from && s != to {
			_ = s.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err() // replicas refuse; gossip tells them
		}
	}
	moved(t, holder, waiter, names, holds, gots, from, to, "after the slot migration")
}
