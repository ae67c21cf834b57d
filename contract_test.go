package relock_test

// The contract suite: the promises every kind keeps, checked over every
// kind and every public method that takes a context, found by reflection,
// so that a new method or kind is covered without editing the suite. A kind
// joins by one row of contractKinds.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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

// A contractKind is one kind as the contract suite drives it: open returns
// the value whose methods are called, for the name given.
type contractKind struct {
	name string
	open func(c *relock.Client, name string) any
	// one, when set, opens the kind so that one hold excludes every other
	// (a Semaphore of one permit); else open does.
	one func(c *relock.Client, name string) any
}

var contractKinds = []contractKind{
	{"Lock", func(c *relock.Client, n string) any { return c.Lock(n) }, nil},
	{"FairLock", func(c *relock.Client, n string) any { return c.FairLock(n) }, nil},
	{"ReadLock", func(c *relock.Client, n string) any { return c.RWLock(n).ReadLock() }, nil},
	{"WriteLock", func(c *relock.Client, n string) any { return c.RWLock(n).WriteLock() }, nil},
	{"MultiLock", func(c *relock.Client, n string) any { return relock.NewMultiLock(c.Lock(n+":a"), c.Lock(n+":b")) }, nil},
	{"RedLock", func(c *relock.Client, n string) any { return relock.NewRedLock(n, []*relock.Client{c}) }, nil},
	{"Semaphore", func(c *relock.Client, n string) any { return c.Semaphore(n, contractPermits) },
		func(c *relock.Client, n string) any { return c.Semaphore(n, 1) }},
	{"CountDownLatch", func(c *relock.Client, n string) any { return c.CountDownLatch(n) }, nil},
	{"SpinLock", func(c *relock.Client, n string) any { return c.SpinLock(n) }, nil},
}

// contractPermits is the Semaphore's capacity in the suite: one permit is
// the suite's hold, so an Acquire of one more is granted.
const contractPermits = 2

// acquires are the methods that start a hold or wait for one: after Close
// they fail with ErrClientClosed, and their failures wrap ErrNotObtained.
var acquires = map[string]bool{"Lock": true, "TryLock": true, "Acquire": true, "TryAcquire": true, "Wait": true, "Do": true}

var (
	ctxType   = reflect.TypeFor[context.Context]()
	errType   = reflect.TypeFor[error]()
	durType   = reflect.TypeFor[time.Duration]()
	fnType    = reflect.TypeFor[func(context.Context) error]()
	guardType = reflect.TypeFor[relock.ForceGuard]()
)

// ctxMethods returns the names of v's exported methods whose first
// parameter is a context: the calls that may reach Redis.
func ctxMethods(v any) []string {
	t := reflect.TypeOf(v)
	var names []string
	for i := range t.NumMethod() {
		m := t.Method(i)
		if m.Type.NumIn() > 1 && m.Type.In(1) == ctxType {
			names = append(names, m.Name)
		}
	}
	return names
}

// callResult is what one call returned, its error apart.
type callResult struct {
	out  []reflect.Value
	err  error
	hctx context.Context // the hold context an acquire returned, if any
	took time.Duration
}

// contractCall calls v's method with ctx and arguments made from their
// types: 1 for a count, wait then lease for the durations, a func that does
// nothing, the name for a string.
func contractCall(v any, method string, ctx context.Context, wait, lease time.Duration) callResult {
	m := reflect.ValueOf(v).MethodByName(method)
	t := m.Type()
	args := make([]reflect.Value, t.NumIn())
	durs := []time.Duration{wait, lease}
	for i := range args {
		switch in := t.In(i); {
		case in == ctxType:
			args[i] = reflect.ValueOf(ctx)
		case in == durType:
			args[i], durs = reflect.ValueOf(durs[0]), durs[1:]
		case in == fnType:
			args[i] = reflect.ValueOf(func(context.Context) error { return nil })
		case in.Kind() == reflect.Int:
			args[i] = reflect.ValueOf(1).Convert(in)
		case in.Kind() == reflect.String:
			args[i] = reflect.ValueOf("contract").Convert(in)
		case in == guardType: // a guard naming an owner that holds nothing
			args[i] = reflect.ValueOf(relock.ForceGuard{Owner: "contract"})
		default:
			panic(fmt.Sprintf("contract suite: %T.%s takes a %v; teach contractCall that type", v, method, in))
		}
	}
	start := time.Now()
	out := m.Call(args)
	r := callResult{out: out, took: time.Since(start)}
	if last := out[len(out)-1]; last.Type() == errType && !last.IsNil() {
		r.err = last.Interface().(error)
	}
	if out[0].Type() == ctxType && r.err == nil && !out[0].IsNil() {
		r.hctx = out[0].Interface().(context.Context)
	}
	return r
}

// hold takes, on v, what its methods act on and returns the hold context:
// a hold (Lock, or Acquire of one permit), or for a latch its count set.
func hold(t *testing.T, v any) context.Context {
	t.Helper()
	ctx := context.Background()
	for _, m := range []string{"Lock", "Acquire", "TrySetCount"} {
		if !reflect.ValueOf(v).MethodByName(m).IsValid() {
			continue
		}
		r := contractCall(v, m, ctx, 0, 0)
		require.NoError(t, r.err, "%T.%s", v, m)
		if r.hctx == nil { // a latch: closed with count 1
			return ctx
		}
		return r.hctx
	}
	t.Fatalf("%T has no way to be held", v)
	return nil
}

// release gives back a hold an acquire returned during a case, by v's
// Unlock or Release.
func release(v any, hctx context.Context) error {
	if hctx == nil {
		return nil
	}
	for _, m := range []string{"Unlock", "Release"} {
		if f := reflect.ValueOf(v).MethodByName(m); f.IsValid() {
			out := f.Call([]reflect.Value{reflect.ValueOf(hctx)})
			if err, _ := out[0].Interface().(error); err != nil {
				return err
			}
			return nil
		}
	}
	return nil
}

// contractCase is one method of one kind, on a value of its own.
type contractCase struct {
	kind, method string
	v            any
	held         context.Context
}

func (c contractCase) String() string { return c.kind + "." + c.method }

// contractCases opens, on c, one value per kind and method, named after
// both under prefix, and holds it when hold is set.
func contractCases(t *testing.T, c *relock.Client, prefix string, held bool) []contractCase {
	var cases []contractCase
	for _, k := range contractKinds {
		for _, m := range ctxMethods(k.open(c, "probe")) {
			v := k.open(c, prefix+":"+k.name+":"+m)
			hctx := context.Background()
			if held {
				hctx = hold(t, v)
			}
			cases = append(cases, contractCase{k.name, m, v, hctx})
		}
	}
	return cases
}

// Every call of every kind returns by its caller's bound whatever Redis does
// (hung, refusing connections, slow by 1 s, blackholed), its failures told
// as Redis's (ErrUnavailable) and, for an acquire, as not obtained; once
// Redis answers again and the Client is closed, nothing of it is left.
// With go-redis's default timeouts and with ContextTimeoutEnabled.
func TestContractEveryCallReturnsByItsBound(t *testing.T) {
	for _, setup := range []string{"Default", "ContextTimeoutEnabled"} {
		for _, f := range deadlineFaults {
			t.Run(setup+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				rdb, admin, breakIt, heal := f.setup(t)
				rdb.Options().ContextTimeoutEnabled = setup == "ContextTimeoutEnabled" // before its first command
				c := relock.New(rdb, relock.WithUnlockTimeout(callBound), relock.WithLogger(quietLogger()))
				t.Cleanup(func() { _ = c.Close() })
				cases := contractCases(t, c, "bound", admin != nil)
				breakIt()
				var wg sync.WaitGroup
				for _, cc := range cases {
					wg.Go(func() { checkBoundedCall(t, cc) })
				}
				wg.Wait()
				heal()
				if admin != nil {
					for _, cc := range cases { // as a deferred Unlock would
						_ = release(cc.v, cc.held)
					}
					require.NoError(t, c.Close())
					requireNothingOf(t, admin, c.ID(), 20*time.Second)
				}
			})
		}
	}
}

// checkBoundedCall makes one case's call with a deadline of callBound while
// Redis is broken, and checks its time and its error.
func checkBoundedCall(t *testing.T, cc contractCase) {
	ctx, cancel := context.WithTimeout(cc.held, callBound)
	defer cancel()
	r := contractCall(cc.v, cc.method, ctx, callBound, 0)
	assert.Less(t, r.took, callBound+boundSlack, "%s took %v (err %v)", cc, r.took, r.err)
	if r.hctx != nil { // obtained on a connection dialed after a cut: no failure
		checkReleaseAfterACut(t, cc.String(), func() error { return release(cc.v, r.hctx) })
		return
	}
	if r.err == nil || errors.Is(r.err, relock.ErrNotHeld) {
		return // answered without Redis: nothing to classify
	}
	if newConnectionsWork(t) && errors.Is(r.err, relock.ErrHolderChanged) {
		return // a guarded force release answered on a connection dialed after a cut
	}
	if newConnectionsWork(t) && errors.Is(r.err, relock.ErrNotConfirmed) && errors.Is(r.err, relock.ErrUnavailable) {
		return // Do obtained on a connection dialed after a cut, ran fn, and its release is retried (checkReleaseAfterACut)
	}
	if newConnectionsWork(t) && !errors.Is(r.err, relock.ErrUnavailable) && errors.Is(r.err, context.DeadlineExceeded) {
		return // answered on a connection dialed after a cut, and waited to its deadline (a latch's Wait)
	}
	assert.ErrorIs(t, r.err, relock.ErrUnavailable, "%s", cc)
	if acquires[cc.method] {
		assert.ErrorIs(t, r.err, relock.ErrNotObtained, "%s: %v", cc, r.err)
	}
}

// After Close every acquire and every change other than a release fails
// with ErrClientClosed, and every other call — Unlock, Release, the
// queries, Client.Channels — still works (never ErrClientClosed); nothing of the Client is
// left in Redis. A new method is a query unless it is named here.
func TestContractAfterClose(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	cases := contractCases(t, c, "closed", true)
	require.NoError(t, c.Close())
	for _, cc := range cases {
		ctx, cancel := context.WithTimeout(cc.held, 2*time.Second)
		r := contractCall(cc.v, cc.method, ctx, 0, 0)
		cancel()
		if acquires[cc.method] || changes[cc.method] {
			assert.ErrorIs(t, r.err, relock.ErrClientClosed, "%s after Close", cc)
			assert.NoError(t, release(cc.v, r.hctx), "%s", cc)
			continue
		}
		assert.NotErrorIs(t, r.err, relock.ErrClientClosed, "%s after Close", cc)
	}
	_, err := c.Channels("closed") // computed, nothing sent
	assert.NoError(t, err, "Channels after Close")
	requireNothingOf(t, srv.Client(), c.ID(), 5*time.Second)
}

// changes are the calls, other than acquires and releases, that change what
// Redis holds: a closed Client refuses them.
var changes = map[string]bool{"ForceUnlock": true, "ForceRelease": true, "ForceUnlockIf": true, "ForceReleaseIf": true, "SetPermits": true, "TrySetCount": true, "CountDown": true, "Delete": true}

// A call whose reply is lost after Redis ran it, and which go-redis sends
// again, answers as its first run did: the same result, the same error
// class, the same counts left in Redis as a twin call whose reply came.
func TestContractReplayedCallsAnswerAsTheirFirstRun(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	drop := redistest.NewReplyDropper()
	rdb.AddHook(drop)
	c := relock.New(rdb, relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	replayed := 0
	for _, k := range contractKinds {
		for _, m := range ctxMethods(k.open(c, "probe")) {
			for _, held := range []bool{false, true} {
				run := func(prefix string, armed bool) string {
					v := k.open(c, fmt.Sprintf("%s:%v:%s:%s", prefix, held, k.name, m))
					hctx := context.Background()
					if held {
						hctx = hold(t, v)
					}
					ctx, cancel := context.WithTimeout(hctx, time.Second)
					defer cancel()
					before := drop.Dropped()
					if armed {
						for _, cmd := range mutatingCommands {
							drop.Arm(cmd, 1)
						}
					}
					r := contractCall(v, m, ctx, 0, 0)
					if armed {
						drop.Disarm()
						replayed += int(drop.Dropped() - before)
					}
					require.NoError(t, release(v, r.hctx))
					return summarize(r) + " " + countsIn(rdb, v)
				}
				first := run("first", false) // also loads the scripts: a NOSCRIPT is no replay
				again := run("replayed", true)
				assert.Equal(t, first, again, "%s.%s replayed (held: %v)", k.name, m, held)
			}
		}
	}
	t.Logf("%d replies dropped and replayed", replayed)
	require.Positive(t, replayed)
}

// mutatingCommands are the commands whose first reply the replay case
// drops (one of them: the first sent).
var mutatingCommands = []string{"EVALSHA", "EVAL", "DEL", "UNLINK", "HSET", "HDEL", "SET", "HINCRBY", "PUBLISH"}

// summarize writes what a call returned in a form that does not depend on
// when or by whom it was made: values, the classes of the error.
func summarize(r callResult) string {
	var b strings.Builder
	for _, v := range r.out[:len(r.out)-1] {
		switch x := v.Interface().(type) {
		case context.Context:
			fmt.Fprintf(&b, "hold=%v ", x != nil)
		case time.Duration:
			fmt.Fprintf(&b, "dur>0=%v ", x > 0)
		case int64: // a token: its value is the clock's
			fmt.Fprintf(&b, "int64>0=%v ", x > 0)
		default:
			fmt.Fprintf(&b, "%+v ", x)
		}
	}
	for _, e := range []error{relock.ErrNotObtained, relock.ErrNotHeld, relock.ErrLockLost, relock.ErrInvalidArgument,
		relock.ErrUnavailable, relock.ErrNotConfirmed, relock.ErrClientClosed, context.DeadlineExceeded} {
		if errors.Is(r.err, e) {
			fmt.Fprintf(&b, "[%v] ", e)
		}
	}
	if errors.Is(r.err, relock.ErrHolderChanged) { // its text names the holder, which differs by run
		b.WriteString("[holder changed] ")
	}
	if r.err != nil && !strings.Contains(b.String(), "[") {
		fmt.Fprintf(&b, "err=%v", r.err)
	}
	return b.String()
}

// countsIn sums the small counts (hold counts, permits, a latch's count) in
// the hash of v's Key, leaving out tokens, deadlines and ids, which differ
// between runs; "-" when v has no key of its own.
func countsIn(rdb *redis.Client, v any) string {
	k, ok := v.(interface{ Key() string })
	if !ok {
		return "-"
	}
	vals, err := rdb.HGetAll(context.Background(), k.Key()).Result()
	if err != nil {
		return err.Error()
	}
	sum := 0
	for _, s := range vals {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < 1000 {
			sum += n
		}
	}
	return fmt.Sprintf("fields=%d counts=%d", len(vals), sum)
}

// A hand-over to a short lease strands nobody: H holds with the watchdog's
// lease; W1 (300 ms lease) and W2 (the watchdog's) wait, each in a Client
// of its own; H's release hands the hold to W1, who never releases it. W2
// must hold within a moment of W1's lease end, not at a fallback timed from
// H's 30 s lease. For every kind that takes a lease (TryLock, TryAcquire)
// and lets one holder exclude the rest (readers share: their case is
// TestRWReaderWokenOnHandOverToShorterWriteLease). The kinds that promise
// no order (unordered) may serve W2 first: W2 then releases, and W1 must
// hold at once.
func TestContractHandOverToAShortLeaseStrandsNobody(t *testing.T) {
	const shortLease = 300 * time.Millisecond
	unordered := map[string]bool{"MultiLock": true, "RedLock": true, "SpinLock": true}
	for _, k := range contractKinds {
		open := k.one
		if open == nil {
			open = k.open
		}
		try := leasedAcquire(open(relock.New(nil), "probe"))
		if try == "" || k.name == "ReadLock" {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			srv := redistest.Start(t)
			name := "short:" + k.name
			h := relock.New(srv.Client())
			t.Cleanup(func() { _ = h.Close() })
			held := hold(t, open(h, name))
			w1, _ := startLeasedWaiter(t, srv, open, name, try, shortLease)
			w2, c2 := startLeasedWaiter(t, srv, open, name, try, 0)
			if !polls[k.name] {
				quiet(t, srv) // both asleep on H's lease
			}

			released := time.Now()
			require.NoError(t, release(open(h, name), held))
			select {
			case g := <-w1: // and never released
				require.NoError(t, g.err)
			case g := <-w2:
				require.True(t, unordered[k.name], "W2 was served before W1 (err %v)", g.err)
				require.NoError(t, g.err)
				require.NoError(t, release(open(c2, name), g.ctx))
				mustGet(t, w1, time.Second)
				t.Logf("W2 was served first; W1 after it: the short lease was not handed over")
				return
			case <-time.After(3 * time.Second):
				t.Fatal("nobody was served after H's release")
			}
			got := mustGet(t, w2, 2*time.Second+shortLease)
			took := time.Since(released)
			t.Logf("W2 held %v after H's release (W1's lease: %v)", took, shortLease)
			require.Less(t, took, 2*time.Second+shortLease, "W2 took the fallback")
			require.NoError(t, release(open(c2, name), got))
		})
	}
}

// polls are the kinds whose waiters poll (at most every 20 ms) rather than
// sleep on the holder's lease: Redis never goes quiet while they wait.
var polls = map[string]bool{"SpinLock": true}

// leasedAcquire names v's acquire that takes a lease, "" when it has none.
func leasedAcquire(v any) string {
	for _, m := range ctxMethods(v) {
		if m == "TryLock" || m == "TryAcquire" {
			return m
		}
	}
	return ""
}

// startLeasedWaiter starts, in a Client of its own, a wait for the kind called
// name with lease, and returns once it waits.
func startLeasedWaiter(t *testing.T, srv *redistest.Server, open func(*relock.Client, string) any, name, try string, lease time.Duration) (<-chan granted, *relock.Client) {
	waiting := make(chan struct{}, 1)
	c := relock.New(srv.Client(), relock.WithObserver(&relock.Observer{
		WaitStarted: func(context.Context, relock.LockInfo) { waiting <- struct{}{} },
	}))
	t.Cleanup(func() { _ = c.Close() })
	out := make(chan granted, 1)
	go func() {
		r := contractCall(open(c, name), try, context.Background(), 20*time.Second, lease)
		out <- granted{r.hctx, r.err}
	}()
	select {
	case <-waiting:
	case g := <-out:
		t.Fatalf("the waiter did not wait: %v", g.err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not start waiting")
	}
	return out, c
}

// A free name of every kind is at most one Redis key (per part, for a
// MultiLock's two), however many holds it had: what a lock keeps for its
// next hold (its last token, the release latch) lives in one key, and a
// queue only while waiters do. A latch counted down by its setter alone
// keeps its mark.
func TestContractFreeNameIsOneKey(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	for _, k := range contractKinds {
		t.Run(k.name, func(t *testing.T) {
			name := "free:" + k.name
			v := k.open(c, name)
			for range 3 {
				hctx := hold(t, v)
				require.NoError(t, release(v, hctx))
			}
			keys, err := rdb.Keys(context.Background(), "*"+name+"*").Result()
			require.NoError(t, err)
			limit := 1
			if k.name == "MultiLock" {
				limit = 2
			}
			assert.LessOrEqual(t, len(keys), limit, "keys of a free %s: %v", k.name, keys)
			assert.NotEmpty(t, keys, "the free name keeps its record (token, latch)")
		})
	}
}
