package bench

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Counter counts the commands the Lockers of one run send to Redis: it is
// installed as a go-redis hook or a rueidis client wrapper.
//
// INFO commandstats alone cannot tell them apart from the commands that
// scripts run inside Redis (both are counted), so the two numbers are kept:
// "sent" is what crossed the network (round trips, the cost the design
// targets), "server" what Redis executed, scripts' inner calls included.
// Commands that go-redis and rueidis send outside their hooks — connection
// setup, pub/sub, pings — can never run inside a script, so they are taken
// from commandstats instead (see connectionCommand).
type Counter struct {
	n atomic.Int64
}

// Sent returns the number of commands counted so far.
func (c *Counter) Sent() int64 { return c.n.Load() }

func (c *Counter) add(name string) {
	if !connectionCommand(strings.ToLower(name)) {
		c.n.Add(1)
	}
}

// connectionCommand reports whether a commandstats entry is a command that
// cannot run inside a script and that the clients send outside their hooks.
func connectionCommand(name string) bool {
	name, _, _ = strings.Cut(name, "|")
	switch name {
	case "ping", "hello", "client", "auth", "select", "readonly",
		"subscribe", "unsubscribe", "ssubscribe", "sunsubscribe", "psubscribe", "punsubscribe":
		return true
	}
	return false
}

// goredisHook counts the commands a go-redis client sends.
type goredisHook struct{ c *Counter }

func (h goredisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h goredisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (h goredisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.c.add(cmd.Name())
		}
		return next(ctx, cmds)
	}
}

// contextTimeout is the running comparison's Config.ContextTimeout (Run
// sets it): Library.New has no Config.
var contextTimeout atomic.Bool

// newGoredis returns a go-redis client with default options, but for
// ContextTimeoutEnabled (Config.ContextTimeout), whose commands c counts.
func newGoredis(addr string, c *Counter) *redis.Client {
	return newGoredisWith(addr, c, contextTimeout.Load())
}

// newGoredisWith is newGoredis with ContextTimeoutEnabled set to
// ctxTimeout.
func newGoredisWith(addr string, c *Counter, ctxTimeout bool) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: ctxTimeout})
	if c != nil {
		rdb.AddHook(goredisHook{c})
	}
	return rdb
}

// countingRueidis counts the commands a rueidis client sends. Lua scripts go
// through Do (EVALSHA, then EVAL on NOSCRIPT).
type countingRueidis struct {
	rueidis.Client
	c *Counter
}

func (r countingRueidis) count(cmd rueidis.Completed) {
	if cs := cmd.Commands(); len(cs) > 0 {
		r.c.add(cs[0])
	}
}

func (r countingRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r.count(cmd)
	return r.Client.Do(ctx, cmd)
}

func (r countingRueidis) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range multi {
		r.count(cmd)
	}
	return r.Client.DoMulti(ctx, multi...)
}

// statsDelta returns, between two commandstats readings, every command
// Redis executed (scripts' inner calls included) and those of them that only
// a client sends outside its hooks. The INFO calls of the readings are left
// out.
func statsDelta(before, after map[string]int64) (server, connection int64) {
	for name, n := range after {
		if name == "info" {
			continue
		}
		d := n - before[name]
		server += d
		if connectionCommand(name) {
			connection += d
		}
	}
	return server, connection
}
