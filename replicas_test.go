package relock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// WithReplicas holds for every kind that grants a hold: on a server with no
// replica, every acquire of a Client made with WithReplicas(1, …) sends its
// WAIT, fails with ErrNotReplicated and ErrNotObtained, and leaves nothing
// of the Client in Redis. A RedLock counts a master whose grant did not
// reach its replicas as one that did not grant, so with its only master
// unreplicated its round fails the same way. A CountDownLatch grants no
// hold: WithReplicas does not apply to it.
func TestContractWithReplicasEveryKind(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client(), relock.WithReplicas(1, 50*time.Millisecond), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	for _, k := range contractKinds {
		if k.name == "CountDownLatch" {
			continue
		}
		for _, m := range ctxMethods(k.open(c, "probe")) {
			if !acquires[m] {
				continue
			}
			t.Run(k.name+"."+m, func(t *testing.T) {
				v := k.open(c, "replicas:"+k.name+":"+m)
				if k.name == "RedLock" {
					// The node timeout must cover a WAIT that times out,
					// which Redis ends at its next tick (hz 10: up to 100 ms
					// late); else the master counts as not answering. The
					// retry delay puts the end of ctx in the sleep after the
					// first round.
					v = relock.NewRedLock("replicas:"+k.name+":"+m, []*relock.Client{c},
						relock.WithNodeTimeout(time.Second), relock.WithRetryDelay(time.Minute))
				}
				before := lockCommands(t, srv)["wait"]
				// A RedLock retries a failed round until its wait ends: Lock
				// and Do wait until ctx does.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				r := contractCall(v, m, ctx, 0, 0)
				require.NoError(t, release(v, r.hctx))
				require.ErrorIs(t, r.err, relock.ErrNotReplicated, "%s.%s", k.name, m)
				require.ErrorIs(t, r.err, relock.ErrNotObtained, "%s.%s", k.name, m)
				assert.Greater(t, lockCommands(t, srv)["wait"], before, "the acquire sent its WAIT")
				requireNothingOf(t, srv.Client(), c.ID(), 5*time.Second)
			})
		}
	}
}

// A MultiLock waits for the replicas of each Client of its parts that asks
// for them: with a part of a plain Client and a part of a Client made with
// WithReplicas on a server with no replica, it fails with ErrNotReplicated
// and releases both parts; of the plain Client's parts alone it holds.
func TestMultiLockWithReplicasPerClient(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	plain := relock.New(rdb)
	repl := relock.New(srv.Client(), relock.WithReplicas(1, 50*time.Millisecond))
	t.Cleanup(func() { _ = plain.Close(); _ = repl.Close() })
	ctx := context.Background()

	for _, lease := range []time.Duration{0, 5 * time.Second} {
		m := relock.NewMultiLock(plain.Lock("a"), repl.Lock("b"), plain.Lock("c"))
		_, err := m.TryLock(ctx, 0, lease)
		require.ErrorIs(t, err, relock.ErrNotReplicated, "lease %v", lease)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		for _, key := range []string{plain.Lock("a").Key(), repl.Lock("b").Key(), plain.Lock("c").Key()} {
			assert.Empty(t, hgetall(t, rdb, key), "%s was released", key)
		}
		assert.Equal(t, 0, plain.TrackedHolds()+repl.TrackedHolds())
	}

	hctx, err := relock.NewMultiLock(plain.Lock("a"), plain.Lock("c")).Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, relock.NewMultiLock(plain.Lock("a"), plain.Lock("c")).Unlock(hctx))
}

// A RedLock applies each master's WithReplicas to that master's grant: a
// master whose grant did not reach its replicas does not count towards the
// quorum. Of three masters, A has a replica and B and C none. With
// WithReplicas(1, …) on every master's Client, only A's grant counts and the
// round fails with ErrNotReplicated, leaving every master free; with B's
// Client asking for no replica, A and B make the quorum.
func TestRedLockWithReplicasPerMaster(t *testing.T) {
	a := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(a.Port()))
	require.Eventually(t, func() bool {
		info, err := redistest.Info(context.Background(), replica.Client(), "replication")
		return err == nil && info["master_link_status"] == "up"
	}, 10*time.Second, 20*time.Millisecond, "the replica follows A")
	b, c := redistest.Start(t), redistest.Start(t)
	newClient := func(srv *redistest.Server, opts ...relock.Option) *relock.Client {
		cl := relock.New(srv.Client(), opts...)
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	withReplica := relock.WithReplicas(1, 50*time.Millisecond)
	ca, cc := newClient(a, withReplica), newClient(c, withReplica)
	ctx := context.Background()

	nodeTimeout := relock.WithNodeTimeout(time.Second) // covers a WAIT that times out (see above)
	r := relock.NewRedLock("red", []*relock.Client{ca, newClient(b, withReplica), cc}, nodeTimeout)
	_, err := r.TryLock(ctx, 0, 5*time.Second)
	require.ErrorIs(t, err, relock.ErrNotReplicated)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	for _, srv := range []*redistest.Server{a, b, c} {
		assert.Empty(t, hgetall(t, srv.Client(), ca.Lock("red").Key()), "the failed round was undone on %s", srv.Addr())
	}

	r = relock.NewRedLock("red", []*relock.Client{ca, newClient(b), cc}, nodeTimeout)
	hctx, err := r.TryLock(ctx, 0, 5*time.Second)
	require.NoError(t, err, "A (replicated) and B (no replica asked) make the quorum")
	assert.NotEmpty(t, hgetall(t, replica.Client(), ca.Lock("red").Key()), "A's grant reached its replica")
	require.NoError(t, r.Unlock(hctx))
}

// On a Cluster, a MultiLock made WithReplicas sends each group's WAIT to the
// master that ran the group's script: with one part on each master, every
// master runs one WAIT per acquire, and every part's replica has the hold
// when Lock returns.
func testClusterMultiLockReplicas(t *testing.T, cl *redistest.Cluster) {
	ctx := context.Background()
	c := relock.New(cl.Client(), relock.WithReplicas(1, time.Second))
	t.Cleanup(func() { _ = c.Close() })
	var parts []*relock.Lock
	masters := make(map[string]*redistest.Server)
	for addr, names := range namesPerMaster(t, cl, c, exclusiveKinds[0], "multi-wait-", 1) {
		parts = append(parts, c.Lock(names[0]))
		m, err := cl.MasterOf(ctx, c.Lock(names[0]).Key())
		require.NoError(t, err)
		masters[addr] = m
	}
	m := relock.NewMultiLock(parts...)
	warm, err := m.Lock(ctx) // loads the script on every master
	require.NoError(t, err)
	require.NoError(t, m.Unlock(warm))
	before := make(map[string]int64)
	for addr, srv := range masters {
		before[addr] = lockCommands(t, srv)["wait"]
	}
	hctx, err := m.Lock(ctx)
	require.NoError(t, err)
	for addr, srv := range masters {
		assert.Equal(t, before[addr]+1, lockCommands(t, srv)["wait"], "one WAIT on %s", addr)
	}
	owner := ownerField(t, c, hctx)
	onReplicas := 0
	for _, srv := range cl.Nodes {
		info, err := redistest.Info(ctx, srv.Client(), "replication")
		require.NoError(t, err)
		if info["role"] != "slave" {
			continue
		}
		replica := srv.Client(func(o *redis.Options) {
			o.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
		})
		for _, p := range parts {
			if n, err := replica.Exists(ctx, p.Key()).Result(); err == nil && n == 1 {
				assert.Equal(t, map[string]string{owner: "1"}, owners(t, replica, p.Key()), "replica %s", srv.Addr())
				onReplicas++
			}
		}
	}
	assert.Equal(t, len(parts), onReplicas, "every part's replica has the hold")
	require.NoError(t, m.Unlock(hctx))
}
