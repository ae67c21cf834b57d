package relock

// Bounded calls on the caller's goroutine (inline.go): which go-redis
// client a call runs on so that go-redis itself ends it by the caller's
// bound.
//
// A call bounded at b runs under a context that ends slack before b, on a
// client that ends a request it has begun within slack of its context's
// deadline (pastDeadline): then no request outlives b. A client with
// ContextTimeoutEnabled needs no slack. Any other is used as is when its
// own write and read timeouts fit in half of what is left of the bound
// (the other half is the time to send the request in); else a go-redis
// *redis.Client (a plain or a failover one) sends the call's commands on a
// clone of it made by WithTimeout(slack/2): it shares the pool and the
// options, and ends each write and each read at slack/2.
//
// The clones are made once, by New, one per bucket of slack below the
// client's own WriteTimeout + ReadTimeout (slackBuckets), never per call.
// go-redis's WithTimeout (v9.17 to v9.23 at least) makes a clone without
// hooks, so New adds
// to each clone the hooks the client has then (hooksOf), in their order:
// those hooks see relock's bounded calls as they see every other. A hook
// added to the client after New does not: it sees only relock's calls that
// run on the client itself (those without a bound, and all of them with
// ContextTimeoutEnabled). Where relock cannot read the client's hooks (a
// go-redis whose layout it does not know), it makes no clones and the
// calls keep the goroutine path, as go-redis's default timeouts did.
//
// A Cluster or Ring client has no WithTimeout: with its own timeouts
// longer than half the bound (go-redis's defaults: 3 s each), its bounded
// calls keep running on a goroutine of relock's (bounded.go).

import (
	"context"
	"reflect"
	"slices"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// slackBuckets are the slacks a bounded inline call reserves, one clone
// each per Client at most (a clone's timeouts are half its slack). The
// smallest keeps a clone's read (25 ms) well above a loopback round trip
// on a busy machine, where a goroutine waits that long for a core: a
// shorter one would fail calls Redis answers in time. A bound shorter than
// twice it (TryLock with no wait: 50 ms) runs on a goroutine, which waits
// for the reply to the bound itself.
var slackBuckets = [...]time.Duration{
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second,
}

// timeoutClones are a Client's clones of its *redis.Client, one per bucket
// of slackBuckets below the client's own pastDeadline (nil above it, and
// all nil when the client cannot be cloned so: not a *redis.Client, one
// with ContextTimeoutEnabled, which needs none, or hooks relock cannot
// read). Made by New, read-only after.
type timeoutClones struct {
	any    bool // some bucket has a clone
	timed  bool // go-redis ends every request of the client by its own timeouts
	clones [len(slackBuckets)]*redis.Client
}

// initClones makes rdb's clones when rdb is a *redis.Client that does not
// end commands at their context's deadline, and records whether go-redis
// bounds every request of rdb by timeouts of its own. A clone whose read
// timeout would cut WithReplicas's WAIT short is not made.
func (c *Client) initClones(rdb redis.UniversalClient) {
	t, ok := timeoutsOf(rdb)
	c.clones.timed = ok && t.read > 0 && t.write > 0
	r, ok := rdb.(*redis.Client)
	if !ok || c.pastDeadline <= 0 {
		return
	}
	hooks, ok := hooksOf(r)
	if !ok {
		return
	}
	for i, slack := range slackBuckets {
		if slack >= c.pastDeadline {
			break
		}
		if c.opts.replicas > 0 && slack/2 <= c.opts.replicaTimeout {
			continue
		}
		clone := r.WithTimeout(slack / 2)
		for _, h := range hooks {
			clone.AddHook(h)
		}
		c.clones.clones[i], c.clones.any = clone, true
	}
}

// hooksOf returns the hooks added to r, outermost first, as go-redis keeps
// them: Client.baseClient.hooksMixin.slice (v9.17), or the slice of the
// snapshot hooksMixin.state holds (later v9). ok is false when r's layout
// is neither. go-redis has no accessor for them.
func hooksOf(r *redis.Client) (hooks []redis.Hook, ok bool) {
	base := reflect.ValueOf(r).Elem().FieldByName("baseClient")
	if base.Kind() != reflect.Pointer || base.IsNil() || base.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	mixin := base.Elem().FieldByName("hooksMixin")
	if mixin.Kind() != reflect.Struct {
		return nil, false
	}
	holder := mixin
	if state := mixin.FieldByName("state"); state.Kind() == reflect.Pointer && !state.IsNil() {
		load := readable(state).MethodByName("Load")
		if !load.IsValid() || load.Type().NumIn() != 0 || load.Type().NumOut() != 1 {
			return nil, false
		}
		snapshot := load.Call(nil)[0]
		if snapshot.Kind() != reflect.Pointer || snapshot.IsNil() || snapshot.Elem().Kind() != reflect.Struct {
			return nil, false
		}
		holder = snapshot.Elem()
	}
	slice := holder.FieldByName("slice")
	if !slice.IsValid() || slice.Type() != reflect.TypeFor[[]redis.Hook]() {
		return nil, false
	}
	return slices.Clone(readable(slice).Interface().([]redis.Hook)), true
}

// readable is v, an addressable unexported field, as one that can be read.
func readable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// bucketWithin is the index of the largest slack bucket of at most slack,
// -1 when none is.
func bucketWithin(slack time.Duration) int {
	for i := len(slackBuckets) - 1; i >= 0; i-- {
		if slackBuckets[i] <= slack {
			return i
		}
	}
	return -1
}

// slackNeeded is the slack c needs for a call that has left to its bound,
// and whether c can bound such a call itself (0, true: it ends requests at
// the deadline).
func (c *Client) slackNeeded(left time.Duration) (time.Duration, bool) {
	switch {
	case c.pastDeadline == 0:
		return 0, true
	case c.pastDeadline > 0 && 2*c.pastDeadline <= left:
		return c.pastDeadline, true
	case !c.clones.any:
		return 0, false
	}
	for i := bucketWithin(left / 2); i >= 0; i-- {
		if c.clones.clones[i] != nil {
			return slackBuckets[i], true
		}
	}
	return 0, false
}

// boundOf is the bound ctx carries (nil: none).
func boundOf(ctx context.Context) *deadlineCtx {
	if d, ok := ctx.(*deadlineCtx); ok {
		return d
	}
	d, _ := ctx.Value(boundKey{}).(*deadlineCtx)
	return d
}

type boundKey struct{}

// rdbFor is the go-redis client a request of c's under ctx runs on: the
// clone that ends it within the slack of ctx's bound (see slackNeeded),
// else c's own.
func (c *Client) rdbFor(ctx context.Context) redis.UniversalClient {
	if !c.clones.any {
		return c.rdb
	}
	d := boundOf(ctx)
	if d == nil || d.slack == 0 || (c.pastDeadline > 0 && c.pastDeadline <= d.slack) {
		return c.rdb
	}
	for i := bucketWithin(d.slack); i >= 0; i-- {
		if r := c.clones.clones[i]; r != nil {
			return r
		}
	}
	return c.rdb
}
