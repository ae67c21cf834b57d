package relock

// What relock reads of a go-redis client's options: the bounds go-redis
// puts on a command, which decide how relock bounds its own calls
// (inline.go, bounded.go, the coalescer's queue).

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// clientTimeouts are a go-redis client's pool, read and write timeouts as
// its connections apply them, and whether it bounds a command by its
// context's deadline (ContextTimeoutEnabled).
type clientTimeouts struct {
	pool, read, write time.Duration
	deadlines         bool
}

// timeoutsOf returns rdb's timeouts; ok is false when rdb is not one of
// go-redis's own clients (a user's wrapper), whose bounds relock cannot
// know.
func timeoutsOf(rdb redis.UniversalClient) (t clientTimeouts, ok bool) {
	switch r := rdb.(type) {
	case *redis.Client:
		o := r.Options()
		return clientTimeouts{o.PoolTimeout, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled}, true
	case *redis.ClusterClient:
		o := r.Options()
		return clientTimeouts{o.PoolTimeout, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled}, true
	case *redis.Ring:
		o := r.Options()
		read, write := ringTimeouts(o)
		return clientTimeouts{o.PoolTimeout, read, write, o.ContextTimeoutEnabled}, true
	}
	return clientTimeouts{}, false
}

// ringTimeouts are the read and write timeouts a Ring's shards apply: a
// Ring keeps its options as given, and each shard's client sets go-redis's
// defaults (0: a 3 s read, a write as long as the read) and its "none"
// (-1, -2: returned as 0).
func ringTimeouts(o *redis.RingOptions) (read, write time.Duration) {
	applied := func(d, def time.Duration) time.Duration {
		switch {
		case d == 0:
			return def
		case d < 0:
			return 0
		}
		return d
	}
	read = applied(o.ReadTimeout, 3*time.Second)
	return read, applied(o.WriteTimeout, read)
}

// honoursDeadlines reports whether rdb bounds a command by its context's
// deadline itself: go-redis's own clients with ContextTimeoutEnabled, which
// then bound the pool wait, the dial, the write and the read by it (without
// it they ignore the context's deadline: baseClient.context returns
// Background). A failover (Sentinel) client is a *redis.Client. Anything
// else — a user's wrapper — is not known to, so its calls are bounded by a
// goroutine of relock's own (bounded.go).
func honoursDeadlines(rdb redis.UniversalClient) bool {
	t, ok := timeoutsOf(rdb)
	return ok && t.deadlines
}
