package relock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/redistest"
)

// The uncontended cycle taken apart, each variant on the same server:
//
//   - client: Lock and Unlock, as a caller runs them;
//   - inline: the same on a go-redis client with ContextTimeoutEnabled,
//     where Unlock runs its release on the caller's goroutine (inline.go);
//   - unfenced: the same with WithFencingTokens(false): no clock read, no
//     tail (3 nested commands less), the price of strictly increasing tokens;
//   - scripts: the same two script calls with the same keys and arguments
//     (the watchdog's lease, a final release), run directly: no registry,
//     context or watchdog;
//   - stubs: two scripts that return the same replies and run no command,
//     with the same keys and arguments: relock's round trips alone;
//   - floor: SET NX PX + compare-and-delete (FloorCycle).
//
// client − scripts is the Client's own work; scripts − stubs is what
// relock's scripts do inside Redis (their nested commands, see
// TestUncontendedCommandsPerCycle); stubs − floor is the price of two
// EVALSHA with relock's keys and arguments over SET and a small script.
var partsVariants = []string{"client", "inline", "unfenced", "scripts", "stubs", "floor"}

// partsRedis returns the go-redis client variant runs on, closed when b
// ends: one with ContextTimeoutEnabled for inline.
func partsRedis(srv *redistest.Server, variant string) *redis.Client {
	return srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = variant == "inline" })
}

// partsClient returns the Client variant runs on rdb.
func partsClient(rdb redis.UniversalClient, variant string) *Client {
	return New(rdb, WithFencingTokens(variant != "unfenced"))
}

var (
	acquireStub = redis.NewScript(`return {1, 0, 1}`)
	releaseStub = redis.NewScript(`return 1`)
)

// partsCycle returns one cycle of variant on lock name of c, whose
// go-redis client is rdb.
func partsCycle(c *Client, rdb redis.UniversalClient, variant, name string) func(context.Context) error {
	l := c.Lock(name)
	owner := c.id + ":bench"
	scripts := func(ctx context.Context, stub bool) error {
		op := c.newOp()
		acq := lockAcquireCall(c, l.keys, owner, acquireReq{op: op, lease: c.opts.watchdogLease}, true)
		rel := lockReleaseCall(c, l.keys, owner, releaseReq{op: c.newOp(), gen: op, final: true})
		if stub {
			// argv nil: built from keys and args for the stub
			acq.script, rel.script, acq.argv, rel.argv = acquireStub, releaseStub, nil, nil
		}
		if got, err := acq.run(ctx, rdb).Int64Slice(); err != nil || got[0] != 1 {
			return fmt.Errorf("acquire: %v %w", got, err)
		}
		if got, err := rel.run(ctx, rdb).Int64(); err != nil || got != 1 {
			return fmt.Errorf("release: %d %w", got, err)
		}
		return nil
	}
	switch variant {
	case "client", "inline", "unfenced":
		return func(ctx context.Context) error {
			held, err := l.Lock(ctx)
			if err != nil {
				return err
			}
			return l.Unlock(held)
		}
	case "scripts":
		return func(ctx context.Context) error { return scripts(ctx, false) }
	case "stubs":
		return func(ctx context.Context) error { return scripts(ctx, true) }
	}
	return func(ctx context.Context) error { return FloorCycle(ctx, rdb, "floor:"+name) }
}

// BenchmarkUncontendedParts splits an uncontended Lock+Unlock on a real
// Redis, one caller at a time, into the variants of partsVariants: where
// the latency goes.
func BenchmarkUncontendedParts(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	ctx := context.Background()
	for _, variant := range partsVariants {
		b.Run(variant, func(b *testing.B) {
			rdb := rdb
			if variant == "inline" {
				rdb = partsRedis(srv, variant)
			}
			c := partsClient(rdb, variant)
			b.Cleanup(func() { _ = c.Close() })
			cycle := partsCycle(c, rdb, variant, "parts")
			if err := cycle(ctx); err != nil { // loads the scripts
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := cycle(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOwnKeysParts splits the same variants under the bench's "64
// processes on 64 keys" load: 64 workers, each with its own go-redis client
// and Client (as separate processes have) and its own lock, on one
// redis-server that shares this machine's cores with them. There the CPU a
// cycle costs decides throughput, so besides ns/op (per cycle, all workers
// together) it reports the CPU per cycle of Redis (redis-µs/op, INFO cpu)
// and of this process (client-µs/op, getrusage).
func BenchmarkOwnKeysParts(b *testing.B) {
	const workers = 64
	srv := redistest.Start(b)
	admin := srv.Client()
	ctx := context.Background()
	for _, variant := range partsVariants {
		b.Run(variant, func(b *testing.B) {
			cycles := make([]func(context.Context) error, workers)
			for i := range cycles {
				rdb := partsRedis(srv, variant)
				c := partsClient(rdb, variant)
				// Closed when this run ends, not the sub-benchmark: RunParallel
				// calls it again for each b.N it tries, and idle Clients of
				// earlier runs would add their CPU to the later ones'.
				defer func() { _ = c.Close(); _ = rdb.Close() }()
				cycles[i] = partsCycle(c, rdb, variant, "own"+strconv.Itoa(i))
				if err := cycles[i](ctx); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int32
			redis0, client0 := redisCPU(b, admin), processCPUOrZero()
			b.SetParallelism((workers + 1) / 2) // × GOMAXPROCS goroutines: one per worker on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				cycle := cycles[int(next.Add(1)-1)%workers]
				for pb.Next() {
					if err := cycle(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			n := float64(b.N)
			b.ReportMetric((redisCPU(b, admin)-redis0).Seconds()*1e6/n, "redis-µs/op")
			b.ReportMetric((processCPUOrZero()-client0).Seconds()*1e6/n, "client-µs/op")
		})
	}
}

// redisCPU returns the CPU time (user + system) the server has used.
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			sum += s
		}
	}
	return time.Duration(sum * float64(time.Second))
}

func processCPUOrZero() time.Duration {
	d, _ := ProcessCPU()
	return d
}

// FloorCycle is one uncontended cycle of the floor every Redis lock is
// measured against (here and in BenchmarkLockUnlock) on key: SET NX PX, then
// a compare-and-delete script.
func FloorCycle(ctx context.Context, rdb redis.UniversalClient, key string) error {
	ok, err := rdb.SetNX(ctx, key, "token", 30*time.Second).Result()
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("floor: the key is held")
	}
	return floorRelease.Run(ctx, rdb, []string{key}, "token").Err()
}

var floorRelease = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
