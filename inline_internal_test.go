package relock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// Lock and Unlock run their requests on the caller's goroutine, with no
// goroutine of relock's started for them, whenever go-redis ends them by
// the call's bound: with ContextTimeoutEnabled or timeouts that fit in
// half the bound, or on the clones New made of a *redis.Client with
// go-redis's default timeouts; with a context that has a deadline as with
// context.Background(). A client relock does not know (a wrapper) hands
// both off (TestCallsReturnByTheCallersBound checks the bound itself).
// Not parallel: the counters are the package's.
func TestLockAndUnlockHandNothingOffWhenGoRedisEndsThemByTheBound(t *testing.T) {
	srv := redistest.Start(t)
	const cycles = 20
	for _, tc := range []struct {
		name       string
		rdb        func() redis.UniversalClient
		lockHops   uint64 // per Lock with a deadline
		unlockHops uint64 // per Unlock
	}{
		{"ContextTimeoutEnabled", func() redis.UniversalClient {
			return srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		}, 0, 0},
		{"ShortTimeouts", func() redis.UniversalClient {
			return srv.Client(func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 250*time.Millisecond, 250*time.Millisecond })
		}, 0, 0},
		{"TimeoutsBeyondHalfTheBound", func() redis.UniversalClient {
			return srv.Client(func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 300*time.Millisecond, 250*time.Millisecond })
		}, 0, 0},
		{"Default", func() redis.UniversalClient { return srv.Client(func(*redis.Options) {}) }, 0, 0},
		{"Wrapper", func() redis.UniversalClient { return wrapped{srv.Client(func(*redis.Options) {})} }, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.rdb(), WithUnlockTimeout(time.Second))
			t.Cleanup(func() { _ = c.Close() })
			kinds := []interface {
				Lock(context.Context) (context.Context, error)
				Unlock(context.Context) error
			}{c.Lock("inline"), c.FairLock("inline-fair"), c.RWLock("inline-rw").WriteLock(), c.RWLock("inline-rw").ReadLock(), NewMultiLock(c.Lock("inline-a"), c.Lock("inline-b"))}
			for _, withDeadline := range []bool{true, false} {
				ctx := context.Background()
				if withDeadline {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
				}
				before := releaseGoroutines.Load() + acquireGoroutines.Load()
				for range cycles {
					for _, l := range kinds {
						held, err := l.Lock(ctx)
						require.NoError(t, err)
						require.NoError(t, l.Unlock(held))
					}
					s := c.Semaphore("inline-sema", 2)
					held, err := s.Acquire(ctx, 1)
					require.NoError(t, err)
					require.NoError(t, s.Release(held))
				}
				per := tc.unlockHops // Unlock is always bounded
				if withDeadline {
					per += tc.lockHops
				}
				want := per * cycles * uint64(len(kinds)+1)
				handOffs := releaseGoroutines.Load() + acquireGoroutines.Load() - before
				assert.Equal(t, want, handOffs, "deadline: %v", withDeadline)
			}
		})
	}
}

// pastDeadline is 0 where go-redis ends a command at its context's
// deadline, its write and read timeouts where it does not, and unknown
// (-1) where they are unbounded or the client is not go-redis's own.
func TestPastDeadlineReadsTheTimeouts(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		want time.Duration
	}{
		{"ContextTimeoutEnabled", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, ReadTimeout: 5 * ms}), 0},
		{"Default", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), 6 * time.Second},
		{"ReadOnlySet", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 100 * ms}), 200 * ms},
		{"Both", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 100 * ms, WriteTimeout: 50 * ms}), 150 * ms},
		{"NoReadTimeout", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -1}), -1},
		{"NoDeadlines", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -2}), -1},
		{"Cluster", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ReadTimeout: 100 * ms, WriteTimeout: 100 * ms}), 200 * ms},
		{"Ring", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ReadTimeout: 100 * ms, WriteTimeout: 100 * ms}), 200 * ms},
		{"ClusterDefault", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), 6 * time.Second},
		{"RingDefault", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}), 6 * time.Second},
		{"RingReadOnlySet", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ReadTimeout: 100 * ms}), 200 * ms},
		{"RingNoTimeout", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ReadTimeout: -1}), -1},
		{"Failover", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ReadTimeout: 100 * ms}), 200 * ms},
		{"Wrapper", wrapped{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 100 * ms})}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.rdb.Close()
			assert.Equal(t, tc.want, pastDeadline(tc.rdb))
		})
	}
}

// honoursDeadlines knows go-redis's own clients by their option, and
// nothing else.
func TestHonoursDeadlinesReadsTheOption(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: on})
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: on})
		r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: on})
		f := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: on})
		for _, rdb := range []redis.UniversalClient{c, cc, r, f} {
			assert.Equal(t, on, honoursDeadlines(rdb), "%T", rdb)
			_ = rdb.Close()
		}
	}
	assert.False(t, honoursDeadlines(wrapped{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})}),
		"a wrapper is not known to enforce deadlines")
}

type wrapped struct{ *redis.Client }

// recordHook holds single EVALSHA commands until open is closed, and
// records, per pipeline of script calls, each call's last argument and the
// pipeline's context's deadline.
type recordHook struct {
	evalGate
	mu        sync.Mutex
	pipelines [][]string
	deadlines []time.Time
}

func (h *recordHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "evalsha" { // a connection's handshake
			return next(ctx, cmds)
		}
		args := make([]string, len(cmds))
		for i, cmd := range cmds {
			a := cmd.Args()
			args[i] = fmt.Sprint(a[len(a)-1])
		}
		d, _ := ctx.Deadline()
		h.mu.Lock()
		h.pipelines, h.deadlines = append(h.pipelines, args), append(h.deadlines, d)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// coalesceRig is a coalescer whose send tokens are all taken by calls held
// at the hook's gate, so that the calls run next queue.
func coalesceRig(t *testing.T) (*coalescer, *redis.Client, *recordHook, *sync.WaitGroup) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	require.NoError(t, echoScript.Load(context.Background(), rdb).Err())
	h := &recordHook{evalGate: newEvalGate()}
	rdb.AddHook(h)
	co := &coalescer{}
	var wg sync.WaitGroup
	for i := range coalesceInFlight {
		wg.Go(func() {
			_, err := co.run(context.Background(), rdb, echoCall(fmt.Sprint("held", i))).Text()
			assert.NoError(t, err)
		})
	}
	waitFor(co, func() bool { return co.one.inFlight == coalesceInFlight })
	return co, rdb, h, &wg
}

func echoCall(arg string) scriptCall {
	return scriptCall{script: echoScript, keys: []string{"k"}, args: []any{arg}}
}

// queueCall runs call on co in a goroutine once n calls are queued, waits
// until it is queued too, and returns where its reply comes.
func queueCall(co *coalescer, rdb *redis.Client, ctx context.Context, arg string) <-chan *redis.Cmd {
	co.mu.Lock()
	n := len(co.one.queue)
	co.mu.Unlock()
	out := make(chan *redis.Cmd, 1)
	go func() { out <- co.run(ctx, rdb, echoCall(arg)) }()
	waitFor(co, func() bool { return len(co.one.queue) == n+1 })
	return out
}

// A queued call whose deadline passes before its batch is taken leaves the
// queue at once, not sent (errNotSent: a definite outcome), while the calls
// queued with it stay and later get their own replies.
func TestCoalescedCallLeavesTheQueueAtItsDeadline(t *testing.T) {
	co, rdb, h, wg := coalesceRig(t)
	before := queueCall(co, rdb, context.Background(), "before")
	expiring := queueCall(co, rdb, newDeadlineCtx(context.Background(), time.Now().Add(150*time.Millisecond)), "expiring")
	after := queueCall(co, rdb, context.Background(), "after")

	select {
	case cmd := <-expiring:
		require.ErrorIs(t, cmd.Err(), errNotSent)
		require.ErrorIs(t, cmd.Err(), ErrUnavailable)
		assert.False(t, outcomeUnknown(cmd.Err()), "not sent: the outcome is known")
	case <-time.After(5 * time.Second):
		t.Fatal("the call whose deadline passed is still queued (the gate is closed)")
	}
	co.mu.Lock()
	assert.Len(t, co.one.queue, 2, "the other calls stay queued")
	co.mu.Unlock()

	close(h.open)
	for arg, ch := range map[string]<-chan *redis.Cmd{"before": before, "after": after} {
		v, err := (<-ch).Text()
		require.NoError(t, err)
		assert.Equal(t, arg, v)
	}
	wg.Wait()
	assert.Equal(t, [][]string{{"before", "after"}}, h.pipelines, "the expired call was never sent")
	assert.Zero(t, co.one.inFlight)
}

// Calls with a deadline and calls without one never share a batch (an
// acquire must not be cut by a release's deadline); a batch of calls with
// deadlines is sent under the latest of them (each caller returns at its
// own), one without deadlines under none, and each call gets its own reply.
func TestCoalescedBatchIsSentUnderItsLatestDeadline(t *testing.T) {
	co, rdb, h, wg := coalesceRig(t)
	soonAt, laterAt := time.Now().Add(20*time.Second), time.Now().Add(40*time.Second)
	calls := []struct {
		arg string
		ctx context.Context
	}{{"none", context.Background()}, {"later", newDeadlineCtx(context.Background(), laterAt)}, {"soon", newDeadlineCtx(context.Background(), soonAt)}, {"none2", context.Background()}}
	replies := make([]<-chan *redis.Cmd, len(calls))
	for i, c := range calls {
		replies[i] = queueCall(co, rdb, c.ctx, c.arg)
	}
	close(h.open)
	for i, c := range calls {
		v, err := (<-replies[i]).Text()
		require.NoError(t, err)
		assert.Equal(t, c.arg, v, "each call's reply is its own")
	}
	wg.Wait()
	require.Len(t, h.pipelines, 2)
	sent := map[string]time.Time{}
	for i, p := range h.pipelines {
		sent[strings.Join(p, ",")] = h.deadlines[i]
	}
	require.Contains(t, sent, "none,none2", "the calls without a deadline, in order, apart")
	require.Contains(t, sent, "later,soon", "the calls with one, in order, apart")
	assert.True(t, sent["none,none2"].IsZero(), "a batch without deadlines goes without one")
	assert.True(t, laterAt.Equal(sent["later,soon"]), "the batch is sent under %v, got %v", laterAt, sent["later,soon"])

	// A batch of calls without deadlines goes without one.
	co2, rdb2, h2, wg2 := coalesceRig(t)
	a, b := queueCall(co2, rdb2, context.Background(), "a"), queueCall(co2, rdb2, context.Background(), "b")
	close(h2.open)
	<-a
	<-b
	wg2.Wait()
	require.Len(t, h2.deadlines, 1)
	assert.True(t, h2.deadlines[0].IsZero())
}

type valueKey struct{}

// A deadlineCtx carries its parent's values and ends at its deadline with
// DeadlineExceeded; released before it, it never ends (see release), and
// keeps its values (a hook may keep it).
func TestDeadlineCtxEndsAtItsDeadlineAndNotWhenReleased(t *testing.T) {
	parent := context.WithValue(context.Background(), valueKey{}, "v")
	d := newDeadlineCtx(parent, time.Now().Add(50*time.Millisecond))
	assert.Equal(t, "v", d.Value(valueKey{}))
	assert.NoError(t, d.Err())
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not ended at its deadline")
	}
	assert.ErrorIs(t, d.Err(), context.DeadlineExceeded)
	d.release() // fired already: nothing to do

	at := time.Now().Add(time.Hour)
	e := newDeadlineCtx(parent, at)
	got, ok := e.Deadline()
	assert.True(t, ok)
	assert.True(t, at.Equal(got))
	assert.NoError(t, e.Err())
	e.release()
	select {
	case <-e.Done():
		t.Fatal("a released deadlineCtx ended")
	default:
	}
	assert.NoError(t, e.Err())
	assert.Equal(t, "v", e.Value(valueKey{}), "its values stay (a hook may keep it)")
}

// A context derived from a deadlineCtx (go-redis's dial derives one)
// watches it through AfterFunc, not a goroutine that could outlive the call: it ends at the deadline with its
// parent's error (AfterFunc's f waits for the parent to have ended: the
// context package panics otherwise), and one cancelled first simply ends.
func TestContextDerivedFromADeadlineCtxEndsWithIt(t *testing.T) {
	d := newDeadlineCtx(context.Background(), time.Now().Add(50*time.Millisecond))
	child, cancel := context.WithTimeout(d, time.Hour)
	defer cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the derived context did not end with its parent")
	}
	assert.ErrorIs(t, child.Err(), context.DeadlineExceeded)
	d.release()

	e := newDeadlineCtx(context.Background(), time.Now().Add(time.Hour))
	early, cancelEarly := context.WithCancel(e)
	cancelEarly()
	<-early.Done()
	e.release()
}
