package relock_test

// The contract suite's refusals: Redis refusing requests for a state of
// its own (out of memory, busy with a script, a read-only replica), which
// says nothing about the lock.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sort"
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

// A refusalFault makes a running Redis refuse requests until heal.
type refusalFault struct {
	name string
	args []string // the server's
	// breakIt makes srv refuse and returns its heal, which returns once
	// srv answers again, and over, which reports whether srv has stopped
	// refusing (a script ends by itself).
	breakIt func(t *testing.T, srv *redistest.Server) (heal func(), over func() bool)
	// refusesAll: every request fails, releases and queries too.
	refusesAll bool
}

// refusalBound is each call's deadline while Redis refuses, longer than
// callBound: a refusal comes back at once, and the test is of how it is
// classified (TestContractEveryCallReturnsByItsBound is of bounds); a
// caller that loses its CPU for a while on a loaded machine (a BUSY Redis
// spins a core) must still reach Redis before its deadline.
const refusalBound = time.Second

var refusalFaults = []refusalFault{
	{"OOM", nil, func(t *testing.T, srv *redistest.Server) (func(), func() bool) {
		admin := srv.Client()
		require.NoError(t, admin.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err())
		require.NoError(t, admin.ConfigSet(context.Background(), "maxmemory", "1").Err())
		return func() { require.NoError(t, admin.ConfigSet(context.Background(), "maxmemory", "0").Err()) }, never
	}, false},
	{"READONLY", nil, func(t *testing.T, srv *redistest.Server) (func(), func() bool) {
		// A replica of a master that is not there: it keeps its data and
		// answers reads, as an old master does right after a failover.
		port, err := redistest.FreePort()
		require.NoError(t, err)
		admin := srv.Client()
		require.NoError(t, admin.SlaveOf(context.Background(), "127.0.0.1", strconv.Itoa(port)).Err())
		return func() { require.NoError(t, admin.SlaveOf(context.Background(), "NO", "ONE").Err()) }, never
	}, false},
	{"BUSY", []string{"--busy-reply-threshold", "50"}, func(t *testing.T, srv *redistest.Server) (func(), func() bool) {
		return busyFor(t, srv, 2*time.Second)
	}, true},
}

// never: a fault that lasts until it is healed.
func never() bool { return false }

// busyFor runs a script that loops for d on srv and returns once srv
// answers BUSY: wait waits for the script's end, and over reports it.
func busyFor(t *testing.T, srv *redistest.Server, d time.Duration) (wait func(), over func() bool) {
	t.Helper()
	const loop = `local t = redis.call('TIME'); local stop = t[1] * 1000000 + t[2] + tonumber(ARGV[1])
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop`
	runner, probe := srv.Client(), srv.Client()
	var err error
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if err = runner.Eval(context.Background(), loop, nil, d.Microseconds()).Err(); errors.Is(err, redis.Nil) {
			err = nil // the script returns nothing
		}
	}()
	require.Eventually(t, func() bool {
		return redis.HasErrorPrefix(probe.Ping(context.Background()).Err(), "BUSY")
	}, d, 5*time.Millisecond, "Redis did not turn BUSY")
	wait = func() {
		<-ended
		require.NoError(t, err)
		require.NoError(t, probe.Ping(context.Background()).Err())
	}
	over = func() bool {
		select {
		case <-ended:
			return true
		default:
			return false
		}
	}
	return wait, over
}

// While Redis refuses requests for a state of its own, every call of every
// kind fails as Redis's failure (ErrUnavailable), never as "someone else
// holds it": an acquire of a free name fails with ErrNotObtained and
// ErrUnavailable and leaves Redis as it was; an Unlock Redis refused is
// ErrNotConfirmed and ErrUnavailable and is retried, so that its lock is
// free within moments of Redis answering again, far below its lease.
func TestContractRedisRefusalsAreUnavailable(t *testing.T) {
	for _, f := range refusalFaults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, f.args...)
			admin := srv.Client()
			c := relock.New(srv.Client(), relock.WithUnlockTimeout(callBound), relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = c.Close() })
			held := contractCases(t, c, "held", true)
			free := contractCases(t, c, "free", false)
			before := redisState(t, admin)
			heal, over := f.breakIt(t, srv)
			var wg sync.WaitGroup
			for _, cc := range held {
				wg.Go(func() { checkRefusedCall(t, cc, false, f.refusesAll, over) })
			}
			for _, cc := range free {
				wg.Go(func() { checkRefusedCall(t, cc, true, f.refusesAll, over) })
			}
			wg.Wait()
			if !f.refusesAll { // nothing of the free names was written
				assert.Equal(t, stateOf(before, "free:"), stateOf(redisState(t, admin), "free:"))
			}
			heal()
			healed := time.Now()
			requireReleasesDone(t, admin, c.ID(), 3*time.Second)
			t.Logf("every refused release done %v after Redis answered again", time.Since(healed))
			for _, cc := range held { // as a deferred Unlock would
				_ = release(cc.v, cc.held)
			}
			require.NoError(t, c.Close())
			requireNothingOf(t, admin, c.ID(), 10*time.Second)
		})
	}
}

// checkRefusedCall makes one case's call while Redis refuses, and checks
// its error: an acquire of a free name must fail as Redis's; any failure
// is Redis's; a release Redis refused is not confirmed.
func checkRefusedCall(t *testing.T, cc contractCase, free, refusesAll bool, over func() bool) {
	ctx, cancel := context.WithTimeout(cc.held, refusalBound)
	defer cancel()
	r := contractCall(cc.v, cc.method, ctx, 0, 0)
	releases := cc.method == "Unlock" || cc.method == "Release"
	// A call that returned while Redis still refused must have failed (a
	// waiting RedLock or SpinLock retries until its context ends, and may
	// outlast a script).
	mustFail := !over() && (free && acquires[cc.method] && cc.kind != "CountDownLatch" || // a free latch is open: Wait reads
		refusesAll && !free && releases)
	// ErrHolderChanged: a guarded force release Redis answered.
	if r.hctx != nil || r.err == nil || errors.Is(r.err, relock.ErrNotHeld) || errors.Is(r.err, relock.ErrHolderChanged) {
		assert.False(t, mustFail, "%s succeeded while Redis refused (err %v)", cc, r.err)
		assert.NoError(t, release(cc.v, r.hctx), "%s", cc)
		return
	}
	if cc.kind == "CountDownLatch" && cc.method == "Wait" && !free && !refusesAll &&
		errors.Is(r.err, relock.ErrNotObtained) && errors.Is(r.err, context.DeadlineExceeded) {
		return // Redis answered: the latch is still closed
	}
	if !assert.ErrorIs(t, r.err, relock.ErrUnavailable, "%s (free %v, took %v)", cc, free, r.took) {
		return
	}
	if acquires[cc.method] {
		assert.ErrorIs(t, r.err, relock.ErrNotObtained, "%s: %v", cc, r.err)
	}
	if releases {
		assert.ErrorIs(t, r.err, relock.ErrNotConfirmed, "%s: %v", cc, r.err)
	}
}

// requireReleasesDone waits until no key of a held case's Unlock or
// Release keeps anything of the Client id.
func requireReleasesDone(t *testing.T, rdb *redis.Client, id string, within time.Duration) {
	t.Helper()
	var left []string
	ok := assert.Eventually(t, func() bool {
		left = left[:0]
		for _, trace := range tracesOf(rdb, id) {
			if strings.Contains(trace, ":Unlock") || strings.Contains(trace, ":Release") {
				left = append(left, trace)
			}
		}
		return len(left) == 0
	}, within, 20*time.Millisecond)
	if !ok {
		t.Errorf("releases not done %v after Redis answered again: %v", within, left)
	}
}

// redisState is every key of rdb with its type and content, TTLs aside.
func redisState(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	state := make(map[string]string, len(keys))
	for _, k := range keys {
		var v any
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "hash":
			v = rdb.HGetAll(ctx, k).Val()
		case "zset":
			v = rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "list":
			v = rdb.LRange(ctx, k, 0, -1).Val()
		case "set":
			m := rdb.SMembers(ctx, k).Val()
			sort.Strings(m)
			v = m
		default:
			v = rdb.Get(ctx, k).Val()
		}
		state[k] = fmt.Sprint(v)
	}
	return state
}

// stateOf is the part of state whose keys contain part.
func stateOf(state map[string]string, part string) map[string]string {
	out := map[string]string{}
	for k, v := range state {
		if strings.Contains(k, part) {
			out[k] = v
		}
	}
	return out
}

// A reshard of a lock's slot (MIGRATING and IMPORTING, MIGRATE, SETSLOT
// NODE) keeps nobody waiting for a lease, for every kind: a release that
// meets it is retried until it gets through, and a waiter whose attempt
// meets it rides it out; either way the waiter is served within moments of
// the reshard's end, far below the holder's 30 s lease. The Clients whose
// go-redis follows no redirect (MaxRedirects -1) meet ASK and MOVED as
// any does once its redirects run out; the others follow them and meet
// TRYAGAIN. The test fails unless all three reached relock. A waiter that
// follows redirects reaches the importing master while its slot is split
// (ASKING), where a script runs only with every key it names: it must not
// fail half-way on a key that one of its own steps removed.
func TestContractReshard(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	seen := &replyCodes{seen: map[string]int{}}
	// newClient makes a Client on a go-redis of its own, which follows
	// redirects or not.
	newClient := func(t *testing.T, redirects bool, opts ...relock.Option) *relock.Client {
		rdb := cl.Client(func(o *redis.ClusterOptions) {
			if !redirects {
				o.MaxRedirects = -1
			}
		})
		rdb.AddHook(seen)
		c := relock.New(rdb, append(opts, relock.WithLogger(quietLogger()))...)
		t.Cleanup(func() { _ = c.Close() })
		// Warm: the slot map and the first connections, before a lease
		// is timed.
		_, err := c.Lock("warm").IsLocked(context.Background())
		require.NoError(t, err)
		return c
	}
	// The cases run one at a time, each on a slot of its own: MIGRATEs of
	// several moves at once block each other's servers until their
	// timeout (IOERR, then CLUSTERDOWN for every case after).
	var wg sync.WaitGroup
	turns := make(chan struct{}, 1)
	for _, k := range contractKinds {
		for _, sc := range []struct {
			name         string
			redirects    bool
			leaseRunsOut bool // else the holder releases during the reshard
		}{{"ReleaseRedirected", true, false}, {"Release", false, false}, {"Wait", false, true}, {"WaitRedirected", true, true}} {
			if sc.leaseRunsOut && leasedAcquire(k.open(relock.New(nil), "probe")) == "" {
				continue // a latch takes no lease: its waiter meets the move in Release
			}
			wg.Go(func() {
				turns <- struct{}{}
				defer func() { <-turns }()
				t.Run(k.name+"/"+sc.name, func(t *testing.T) {
					waiting := make(chan struct{}, 1)
					w := newClient(t, sc.redirects, relock.WithObserver(&relock.Observer{
						WaitStarted: func(context.Context, relock.LockInfo) { waiting <- struct{}{} },
					}))
					runReshard(t, cl, k, newClient(t, sc.redirects), w, waiting, sc.leaseRunsOut)
				})
			})
		}
	}
	wg.Wait()
	t.Logf("replies that reached relock: %v", seen.codes())
	for _, code := range []string{"TRYAGAIN", "ASK", "MOVED"} {
		assert.Positive(t, seen.count(code), "no %s reached relock", code)
	}
}

// reshardLease is the lease of a holder whose lease runs out during the
// reshard, so that the waiter's next attempt meets it; long enough for the
// waiter to start waiting and the move to begin on a loaded machine.
// reshardWindow is how long the move is under way after the release or
// the lease's end.
const (
	reshardLease  = 3 * time.Second
	reshardWindow = 500 * time.Millisecond
)

// runReshard has h hold kind k's name and w wait for it, moves the name's
// slot to another master, and has h release (or its lease run out) while
// the move is under way; it checks that w is served soon after the move.
func runReshard(t *testing.T, cl *redistest.Cluster, k contractKind, h, w *relock.Client, waiting <-chan struct{}, leaseRunsOut bool) {
	ctx := context.Background()
	name := "reshard:" + t.Name()
	open := k.one
	if open == nil {
		open = k.open
	}
	blocker := open
	if k.name == "ReadLock" { // readers share: a writer keeps them out
		blocker = func(c *relock.Client, n string) any { return c.RWLock(n).WriteLock() }
	}
	slotOf := "{" + name + "}"
	if k.name == "MultiLock" {
		slotOf = "{" + name + ":a}"
	}
	var held context.Context
	windowEnd := time.Now().Add(reshardLease + reshardWindow)
	if leaseRunsOut {
		r := contractCall(blocker(h, name), leasedAcquire(blocker(h, name)), ctx, 0, reshardLease)
		require.NoError(t, r.err)
		held = r.hctx
	} else {
		held = hold(t, blocker(h, name))
	}
	waiter := startReshardWaiter(t, open(w, name))
	select { // a first attempt that fails ends an acquire: the move comes after it
	case <-waiting:
	case g := <-waiter:
		t.Fatalf("the waiter did not wait: %v", g.err)
	}
	move, err := cl.BeginMove(ctx, slotOf)
	require.NoError(t, err)
	released := make(chan error, 1)
	if leaseRunsOut {
		released <- nil
	} else {
		windowEnd = time.Now().Add(reshardWindow)
		go func() { released <- reshardRelease(blocker(h, name), held) }()
	}
	time.Sleep(time.Until(windowEnd)) // the move under way: a release, or the lease's end and the retry after it, meets it
	require.NoError(t, move.Finish(ctx))
	finished := time.Now()
	if err := <-released; err != nil { // else the release got through the move
		assert.ErrorIs(t, err, relock.ErrNotConfirmed)
		assert.ErrorIs(t, err, relock.ErrUnavailable)
	}
	select {
	case g := <-waiter:
		require.NoError(t, g.err, "the waiter's wait ended on the reshard")
		t.Logf("the waiter was served %v after the reshard", time.Since(finished))
		_ = release(open(w, name), g.ctx)
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiter was not served 5 s after the reshard (the holder's lease is 30 s)")
	}
}

// startReshardWaiter starts v's wait for its lock (Lock, Acquire or Wait) and
// returns once the wait has begun.
func startReshardWaiter(t *testing.T, v any) <-chan granted {
	out := make(chan granted, 1)
	method := "Lock"
	for _, m := range []string{"Acquire", "Wait"} {
		if reflect.ValueOf(v).MethodByName(m).IsValid() {
			method = m
		}
	}
	go func() {
		r := contractCall(v, method, context.Background(), 0, 0)
		out <- granted{r.hctx, r.err}
	}()
	return out
}

// reshardRelease ends the hold held of v: Unlock or Release, which retry
// in the background, or a latch's CountDown, which its caller retries
// until it is confirmed, as the latch's godoc asks.
func reshardRelease(v any, held context.Context) error {
	l, ok := v.(*relock.CountDownLatch)
	if !ok {
		return release(v, held)
	}
	for n := 0; ; n++ {
		err := l.CountDown(held)
		if err == nil || !errors.Is(err, relock.ErrUnavailable) || n == 100 {
			return err
		}
		time.Sleep(20 * time.Millisecond) // a backoff, no signal to wait for
	}
}

// replyCodes counts the codes of the error replies a go-redis client
// returned to relock (after its own redirects and retries).
type replyCodes struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *replyCodes) note(err error) {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return
	}
	code, _, _ := strings.Cut(reply.Error(), " ")
	r.mu.Lock()
	r.seen[code]++
	r.mu.Unlock()
}

func (r *replyCodes) count(code string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[code]
}

func (r *replyCodes) codes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.seen)
}

func (r *replyCodes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *replyCodes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.note(cmd.Err())
		return err
	}
}

func (r *replyCodes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			r.note(cmd.Err())
		}
		return err
	}
}
