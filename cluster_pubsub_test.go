package relock_test

// The pub/sub of a Cluster: the waiters' sharded subscriptions (one
// connection per master, one subscription per lock), and where the
// servers refuse sharded pub/sub, forced or fallen back from.

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// clientList returns the CLIENT LIST lines of one node.
func clientList(t *testing.T, node *redis.Client) []string {
	t.Helper()
	s, err := node.ClientList(context.Background()).Result()
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(s), "\n")
}

// shardSubscribers counts the connections on node that have sharded
// subscriptions, and their subscriptions in total.
func shardSubscribers(t *testing.T, node *redis.Client) (conns, subs int) {
	return subscriberConns(t, node, "ssub=")
}

// subscriberConns counts the connections on node whose CLIENT LIST field
// (ssub= for sharded subscriptions, sub= for classic ones) is not 0, and
// that field's sum.
func subscriberConns(t *testing.T, node *redis.Client, field string) (conns, subs int) {
	t.Helper()
	for _, line := range clientList(t, node) {
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, field); ok {
				n, err := strconv.Atoi(v)
				require.NoError(t, err)
				if n > 0 {
					conns++
					subs += n
				}
			}
		}
	}
	return conns, subs
}

// liveNumSub sums PUBSUB NUMSUB of channel over the running nodes of cl.
func liveNumSub(cl *redistest.Cluster, channel string) int64 {
	var n int64
	for _, node := range cl.Nodes {
		if !node.Running() {
			continue
		}
		if m, err := node.Client().PubSubNumSub(context.Background(), channel).Result(); err == nil {
			n += m[channel]
		}
	}
	return n
}

func shardNumSub(t *testing.T, node *redis.Client, channel string) int64 {
	t.Helper()
	m, err := node.PubSubShardNumSub(context.Background(), channel).Result()
	require.NoError(t, err)
	return m[channel]
}

// Waiters in one process sleep on sharded subscriptions: one connection per
// master, carrying every channel of that master's slots, and an unlock
// (SPUBLISH on the lock's node) wakes them. Where the servers have no
// sharded pub/sub (Redis 6.2), they sleep on classic subscriptions, all on
// one connection, and an unlock's PUBLISH reaches them through the
// cluster bus.
func testClusterWaiters(t *testing.T, cl *redistest.Cluster, k lockKind) {
	ctx := context.Background()
	nodes := nodeClients(t, cl)
	sharded := redistest.ShardedPubSub(ctx, cl.Client())
	holder := relock.New(cl.Client())
	t.Cleanup(func() { _ = holder.Close() })
	waiter := relock.New(cl.Client())
	t.Cleanup(func() { _ = waiter.Close() })

	perMaster := namesPerMaster(t, cl, holder, k, k.name+"-wait-", 2)
	type held struct {
		name string
		ctx  context.Context
		tok  int64
	}
	var holds []held
	for _, names := range perMaster {
		for _, name := range names {
			hctx, err := k.open(holder, name).Lock(ctx)
			require.NoError(t, err)
			tok, err := k.open(holder, name).Token(hctx)
			require.NoError(t, err)
			holds = append(holds, held{name, hctx, tok})
		}
	}

	type got struct {
		name string
		ctx  context.Context
		err  error
	}
	results := make(chan got, len(holds))
	for _, h := range holds {
		go func() {
			wctx, err := k.open(waiter, h.name).Lock(ctx)
			results <- got{h.name, wctx, err}
		}()
	}
	require.Eventually(t, func() bool { return waiter.SubscribedChannels() == len(holds) }, 10*time.Second, 5*time.Millisecond)

	if !sharded {
		require.Eventually(t, func() bool {
			conns, subs := 0, 0
			for _, node := range nodes {
				c, s := subscriberConns(t, node, "sub=")
				conns, subs = conns+c, subs+s
			}
			return conns == 1 && subs == len(holds)
		}, 10*time.Second, 10*time.Millisecond, "one classic subscriber connection")
	}
	// Each master carries its own channels on exactly one connection.
	for addr, names := range perMaster {
		if !sharded {
			break
		}
		node := nodes[addr]
		require.Eventually(t, func() bool {
			conns, subs := shardSubscribers(t, node)
			return conns == 1 && subs == len(names)
		}, 10*time.Second, 10*time.Millisecond, "one sharded subscriber connection on %s", addr)
		for _, name := range names {
			if ch := k.channelOf(waiter, name); ch != "" { // FairLock: one channel per waiter
				assert.EqualValues(t, 1, shardNumSub(t, node, ch), "subscribed on the lock's own node")
			}
		}
	}
	select {
	case r := <-results:
		t.Fatalf("%s was granted while held: %v", r.name, r.err)
	default:
	}

	for _, h := range holds {
		require.NoError(t, k.open(holder, h.name).Unlock(h.ctx))
	}
	for range holds {
		select {
		case r := <-results:
			require.NoError(t, r.err)
			l := k.open(waiter, r.name)
			tok, err := l.Token(r.ctx)
			require.NoError(t, err)
			for _, h := range holds {
				if h.name == r.name {
					assert.Greater(t, tok, h.tok)
				}
			}
			require.NoError(t, l.Unlock(r.ctx))
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter was not woken by the unlock")
		}
	}
	// The last waiter out unsubscribes (after the hand-over channels'
	// linger): nothing stays subscribed anywhere.
	require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 0 }, 10*time.Second, 10*time.Millisecond)
	for addr := range nodes {
		require.Eventually(t, func() bool {
			_, shard := shardSubscribers(t, nodes[addr])
			_, classic := subscriberConns(t, nodes[addr], "sub=")
			return shard == 0 && classic == 0
		}, 5*time.Second, 10*time.Millisecond)
	}
}

// Where the server refuses SPUBLISH (here an ACL without +spublish; Redis
// 6.2 does not know it), WithShardedPubSub(true) fails every call, from the
// first, with ErrUnsupported naming it, and writes nothing; rather than
// taking locks whose releases then fail in the middle of their script.
func TestShardedPubSubForcedWhereRefused(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	admin := srv.Client()
	rules := slices.DeleteFunc(slices.Clone(leastPrivilege), func(r string) bool { return r == "+spublish" })
	setUser(t, admin, "nospublish", rules)
	rdb := srv.Client(func(o *redis.Options) { o.Username, o.Password = "nospublish", "s3cret" })
	c := relock.New(rdb, relock.WithShardedPubSub(true))
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for range 2 {
		_, err := c.Lock("forced").Lock(ctx)
		require.ErrorIs(t, err, relock.ErrUnsupported)
		assert.ErrorContains(t, err, "SPUBLISH")
	}
	assert.Zero(t, admin.Exists(ctx, c.Lock("forced").Key()).Val(), "nothing written")

	// Without the option the same user's Client just uses classic pub/sub.
	plain := relock.New(rdb)
	t.Cleanup(func() { _ = plain.Close() })
	hctx, err := plain.Lock("forced").Lock(ctx)
	require.NoError(t, err)
	got := lockAsync(plain.Lock("forced"))
	require.Eventually(t, func() bool { return plain.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, plain.Lock("forced").Unlock(hctx))
	wctx := mustGet(t, got, 5*time.Second)
	require.NoError(t, plain.Lock("forced").Unlock(wctx))
}

// A Cluster whose servers refuse SPUBLISH (here an ACL without the sharded
// pub/sub commands, as on Redis 6.2, which lacks them) gets classic pub/sub
// by default: locks are released and waiters woken, where a Client that
// assumed sharded pub/sub failed every release that published.
func TestClusterWithoutShardedPubSubUsesClassic(t *testing.T) {
	noLeaks(t)
	cl := redistest.StartCluster(t, 3, 0)
	rules := slices.DeleteFunc(slices.Clone(leastPrivilege), func(r string) bool {
		return r == "+spublish" || r == "+ssubscribe" || r == "+sunsubscribe"
	})
	rules = append(rules, "+cluster|slots", "+cluster|shards", "+command", "+readonly") // go-redis's Cluster bookkeeping
	for _, node := range cl.Nodes {
		setUser(t, node.Client(), "classic", rules)
	}
	asUser := func() *redis.ClusterClient {
		return cl.Client(func(o *redis.ClusterOptions) { o.Username, o.Password = "classic", "s3cret" })
	}
	eachKind(t, func(t *testing.T, k lockKind) {
		holder := relock.New(asUser())
		t.Cleanup(func() { _ = holder.Close() })
		waiter := relock.New(asUser())
		t.Cleanup(func() { _ = waiter.Close() })
		ctx := context.Background()
		name := "classic-" + k.name
		hctx, err := k.open(holder, name).Lock(ctx)
		require.NoError(t, err)
		got := lockAsync(k.open(waiter, name))
		require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, k.open(holder, name).Unlock(hctx))
		wctx := mustGet(t, got, 2*time.Second) // woken, not by the lease (30 s)
		require.NoError(t, k.open(waiter, name).Unlock(wctx))
	})
}
