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
// Clones are kept per Client by bucket of slack (slackBuckets, made when a
// call first needs one), not made per call.
//
// Hooks: go-redis's clones carry no hooks (v9.17: WithTimeout makes a
// baseClient of its own). So New adds one hook to such a client
// (boundHook), which hands the commands relock sends under a bound to the
// clone once the hooks outside it have run: the hooks added to the client
// before New wrap relock's bounded calls, as they wrap every other; a
// hook added after New sits inside relock's and does not see them. The
// hook passes every other command on untouched.
//
// A Cluster or Ring client has no WithTimeout: with its own timeouts
// longer than half the bound (go-redis's defaults: 3 s each), its bounded
// calls keep running on a goroutine of relock's (bounded.go).

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// clonesEnabled turns the bounded clones on. They are off: New's AddHook
// races with the go-redis client's use by other goroutines (go-redis's
// AddHook is not safe for concurrent use), and go-redis's clones carry no
// hooks of their own, so a default *redis.Client keeps its bounded calls on
// a goroutine of relock's (bounded.go) until the hooks can be followed
// without adding one at New.
const clonesEnabled = false

// slackBuckets are the slacks a bounded inline call reserves, one clone
// each per Client at most (a clone's timeouts are half its slack). The
// smallest keeps a clone's read well above a loopback round trip on a busy
// machine; a bound shorter than twice it runs on a goroutine.
var slackBuckets = [...]time.Duration{
	4 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second,
}

// timeoutClones are a Client's clones of its *redis.Client, one per
// bucket of slackBuckets, made on first use; base is nil when the client
// cannot be cloned so (not a *redis.Client, or one with
// ContextTimeoutEnabled, which needs none).
type timeoutClones struct {
	base   *redis.Client
	timed  bool // go-redis ends every request of the client by its own timeouts
	clones [len(slackBuckets)]atomic.Pointer[redis.Client]
}

// initClones makes rdb's clones available when rdb is a *redis.Client
// that does not end commands at their context's deadline, and records
// whether go-redis bounds every request of rdb by timeouts of its own.
func (c *Client) initClones(rdb redis.UniversalClient) {
	if r, ok := rdb.(*redis.Client); ok && c.pastDeadline != 0 && clonesEnabled {
		c.clones.base = r
		r.AddHook(boundHook{c})
	}
	t, ok := timeoutsOf(rdb)
	c.clones.timed = ok && t.read > 0 && t.write > 0
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

// clone returns the clone of bucket i, making it on first use (two
// callers may both make it; one is kept, the other dropped: they share
// everything but their options).
func (t *timeoutClones) clone(i int) *redis.Client {
	if r := t.clones[i].Load(); r != nil {
		return r
	}
	r := t.base.WithTimeout(slackBuckets[i] / 2)
	if t.clones[i].CompareAndSwap(nil, r) {
		return r
	}
	return t.clones[i].Load()
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
	case c.clones.base == nil:
		return 0, false
	}
	i := bucketWithin(left / 2)
	if i < 0 {
		return 0, false
	}
	return slackBuckets[i], true
}

// boundHook runs, on a clone (see slackNeeded), each command and pipeline
// that relock sends under an inline bound (a deadlineCtx, found by
// ctx.Value: hooks outside it may wrap the context) on a client that does
// not end it by the bound itself; anything else goes on down the chain.
// It is added to the client by New, so the hooks added before New wrap
// relock's calls (go-redis's clones carry no hooks of their own).
type boundHook struct{ c *Client }

// boundOf is the bound ctx carries (nil: none).
func boundOf(ctx context.Context) *deadlineCtx {
	d, _ := ctx.Value(boundKey{}).(*deadlineCtx)
	return d
}

type boundKey struct{}

// cloneFor is the clone a call bounded by d runs on, nil when c's own
// client ends it by the bound.
func (c *Client) cloneFor(d *deadlineCtx) *redis.Client {
	if d == nil || (c.pastDeadline > 0 && c.pastDeadline <= d.slack) {
		return nil
	}
	if i := bucketWithin(d.slack); i >= 0 {
		return c.clones.clone(i)
	}
	return nil
}

func (h boundHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h boundHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if r := h.c.cloneFor(boundOf(ctx)); r != nil {
			return r.Process(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (h boundHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r := h.c.cloneFor(boundOf(ctx))
		if r == nil {
			return next(ctx, cmds)
		}
		pipe := r.Pipeline()
		for _, cmd := range cmds {
			_ = pipe.Process(ctx, cmd)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
}
