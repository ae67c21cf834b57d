package relock

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gateHook holds every single script command (not pipelines) until open is
// closed, and records the size of every pipeline.
type gateHook struct {
	evalGate
	mu    sync.Mutex
	sizes []int
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.sizes = append(h.sizes, len(cmds))
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

var echoScript = redis.NewScript(`
if ARGV[1] == 'fail' then
	return redis.error_reply('ERR asked to fail')
end
return ARGV[1]`)

// Calls queued behind the sends in flight leave in batches no larger than
// coalesceMaxBatch, each call gets its own reply or error (an error reply
// fails that call only), and a batch of scripts the server does not know
// yet (NOSCRIPT) is loaded and sent again.
func TestCoalescedBatchesAreBoundedAndRepliesPerCall(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, echoScript.Load(context.Background(), rdb).Err())
	h := &gateHook{evalGate: newEvalGate()}
	rdb.AddHook(h)
	var co coalescer
	ctx := context.Background()
	call := func(arg string) scriptCall {
		return scriptCall{script: echoScript, keys: []string{"k"}, args: []any{arg}}
	}

	const queued = 3*coalesceMaxBatch + 5
	var wg sync.WaitGroup
	for i := range coalesceInFlight { // they take the send tokens, held at the gate
		wg.Go(func() {
			v, err := co.run(ctx, rdb, call(fmt.Sprint("first", i))).Text()
			assert.NoError(t, err)
			assert.Equal(t, fmt.Sprint("first", i), v)
		})
	}
	waitFor(&co, func() bool { return co.one.inFlight == coalesceInFlight })
	require.NoError(t, rdb.ScriptFlush(ctx).Err(), "the queued calls will meet NOSCRIPT")
	for i := range queued {
		wg.Go(func() {
			arg := fmt.Sprint(i)
			if i%7 == 3 {
				arg = "fail"
			}
			v, err := co.run(ctx, rdb, call(arg)).Text()
			if arg == "fail" {
				assert.ErrorContains(t, err, "asked to fail", "call %d", i)
				return
			}
			assert.NoError(t, err, "call %d", i)
			assert.Equal(t, arg, v, "call %d gets its own reply", i)
		})
	}
	waitFor(&co, func() bool { return len(co.one.queue) == queued })
	close(h.open)
	wg.Wait()
	assert.Zero(t, co.one.inFlight, "every token is back")
	assert.Empty(t, co.one.queue)
	total := 0
	for _, n := range h.sizes {
		assert.LessOrEqual(t, n, coalesceMaxBatch)
		total += n
	}
	t.Logf("pipelines: %v", h.sizes)
	assert.GreaterOrEqual(t, len(h.sizes), 4, "%d queued calls leave in at least 4 batches", queued)
	assert.Greater(t, total, queued, "EVALSHA then EVAL for the scripts the server forgot")
}

// waitFor yields until cond, read under the coalescer's lock, holds.
func waitFor(co *coalescer, cond func() bool) {
	for {
		co.mu.Lock()
		ok := cond()
		co.mu.Unlock()
		if ok {
			return
		}
		runtime.Gosched()
	}
}

var setScript = redis.NewScript(`
if ARGV[1] == 'fail' then
	return redis.error_reply('ERR asked to fail')
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]`)

// On a Cluster whose slot map changed under the client, a batch queued for
// the node the client believed in still gives each call its own reply: the
// call on the moved slot follows MOVED to its new master, where it meets
// NOSCRIPT and is sent again by EVAL, and an error reply fails its call
// only. Each call ran on the master that serves its key.
func TestCoalescedBatchFollowsMovedPerCall(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	rdb := cl.Client()
	ctx := context.Background()
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return setScript.Load(ctx, m).Err()
	}))
	masters, err := cl.Masters(ctx)
	require.NoError(t, err)
	from, err := cl.MasterOf(ctx, "moved")
	require.NoError(t, err)
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	var stay []string // keys that stay on from
	for i := 0; len(stay) < coalesceInFlight+3; i++ {
		k := fmt.Sprint("stay", i)
		if m, err := cl.MasterOf(ctx, k); assert.NoError(t, err) && m == from {
			stay = append(stay, k)
		}
	}
	rdb.ReloadState(ctx) // the client learns the slot map before it changes
	require.Eventually(t, func() bool {
		n, err := rdb.MasterForKey(ctx, "moved")
		return err == nil && n.Options().Addr == from.Addr()
	}, 5*time.Second, 10*time.Millisecond)

	slot, err := from.Client().ClusterKeySlot(ctx, "moved").Result()
	require.NoError(t, err)
	toID, err := to.Client().ClusterMyID(ctx).Result()
	require.NoError(t, err)
	for _, m := range masters {
		require.NoError(t, m.Client().Do(ctx, "cluster", "setslot", slot, "node", toID).Err())
	}
	require.NoError(t, to.Client().ScriptFlush(ctx).Err(), "the moved call meets NOSCRIPT")

	h := &gateHook{evalGate: newEvalGate()}
	rdb.AddHook(h)
	var co coalescer
	call := func(key, arg string) scriptCall {
		return scriptCall{script: setScript, keys: []string{key}, args: []any{arg}}
	}
	var wg sync.WaitGroup
	for i := range coalesceInFlight { // they take from's send tokens, held at the gate
		wg.Go(func() {
			v, err := co.run(ctx, rdb, call(stay[i], stay[i])).Text()
			assert.NoError(t, err)
			assert.Equal(t, stay[i], v)
		})
	}
	waitFor(&co, func() bool { return co.lanes[from.Addr()] != nil && co.lanes[from.Addr()].inFlight == coalesceInFlight })
	queued := map[string]string{"moved": "moved", stay[coalesceInFlight]: "fail", stay[coalesceInFlight+1]: stay[coalesceInFlight+1]}
	for key, arg := range queued {
		wg.Go(func() {
			v, err := co.run(ctx, rdb, call(key, arg)).Text()
			if arg == "fail" {
				assert.ErrorContains(t, err, "asked to fail", key)
				return
			}
			assert.NoError(t, err, key)
			assert.Equal(t, arg, v, "%s gets its own reply", key)
		})
	}
	waitFor(&co, func() bool { return len(co.lanes[from.Addr()].queue) == len(queued) })
	close(h.open)
	wg.Wait()
	assert.Contains(t, h.sizes, len(queued), "the queued calls left as one batch")
	stats, err := from.Client().Info(ctx, "errorstats").Result()
	require.NoError(t, err)
	assert.Contains(t, stats, "errorstat_MOVED", "the batch met MOVED")
	got, err := to.Client().Get(ctx, "moved").Result()
	require.NoError(t, err, "the moved call ran on its new master")
	assert.Equal(t, "moved", got)
	for i, k := range stay[:coalesceInFlight+2] {
		n, err := from.Client().Exists(ctx, k).Result()
		require.NoError(t, err)
		want := int64(1)
		if i == coalesceInFlight {
			want = 0 // the failed call wrote nothing
		}
		assert.Equal(t, want, n, "%s ran on its master", k)
	}
}

// A queued call without a deadline waits for its send at most go-redis's
// PoolTimeout, as go-redis waits for a connection: then it leaves the
// queue, not sent (a definite outcome), while the sends it waited behind
// go on.
func TestQueuedCallWithoutDeadlineLeavesAtThePoolTimeout(t *testing.T) {
	srv := redistest.Start(t)
	const poolTimeout = 200 * time.Millisecond
	rdb := srv.Client(func(o *redis.Options) { o.PoolTimeout = poolTimeout })
	require.NoError(t, echoScript.Load(context.Background(), rdb).Err())
	h := &recordHook{evalGate: newEvalGate()}
	rdb.AddHook(h)
	var co coalescer
	ctx := context.Background()
	before, err := redistest.CommandCalls(ctx, srv.Client())
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range coalesceInFlight { // they take the send tokens, held at the gate
		wg.Go(func() {
			v, err := co.run(ctx, rdb, echoCall(fmt.Sprint("held", i))).Text()
			assert.NoError(t, err)
			assert.Equal(t, fmt.Sprint("held", i), v)
		})
	}
	waitFor(&co, func() bool { return co.one.inFlight == coalesceInFlight })
	assert.Equal(t, poolTimeout, co.queueBound)

	start := time.Now()
	err = co.run(ctx, rdb, echoCall("queued")).Err()
	took := time.Since(start)
	require.ErrorIs(t, err, errQueueTimeout)
	require.ErrorIs(t, err, ErrUnavailable)
	assert.False(t, outcomeUnknown(err), "not sent: the outcome is known")
	assert.GreaterOrEqual(t, took, poolTimeout, "it waited its bound")
	assert.Less(t, took, poolTimeout+time.Second)
	co.mu.Lock()
	assert.Empty(t, co.one.queue)
	assert.Equal(t, coalesceInFlight, co.one.inFlight, "the sends it waited behind go on")
	co.mu.Unlock()

	close(h.open)
	wg.Wait()
	after, err := redistest.CommandCalls(ctx, srv.Client())
	require.NoError(t, err)
	assert.Equal(t, int64(coalesceInFlight), after["evalsha"]-before["evalsha"], "the call that left was never sent")
	assert.Zero(t, after["eval"]-before["eval"])
	assert.Zero(t, co.one.inFlight)
}

// poolTimeout is go-redis's own wait for a connection, as each client
// applies it: a Ring keeps its options as given and its shards set the
// defaults.
func TestPoolTimeoutAsGoRedisAppliesIt(t *testing.T) {
	ring := func(o redis.RingOptions) *redis.Ring {
		o.Addrs = map[string]string{"a": "127.0.0.1:1"}
		return redis.NewRing(&o)
	}
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		want time.Duration
	}{
		{"Client", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), 4 * time.Second},
		{"ClientSet", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolTimeout: time.Second}), time.Second},
		{"Ring", ring(redis.RingOptions{}), 4 * time.Second},
		{"RingRead", ring(redis.RingOptions{ReadTimeout: time.Second}), 2 * time.Second},
		{"RingNoRead", ring(redis.RingOptions{ReadTimeout: -1}), 30 * time.Second},
		{"Cluster", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.rdb.Close()
			assert.Equal(t, tc.want, poolTimeout(tc.rdb))
		})
	}
}
