package relock

import (
	"context"
	"errors"
	"fmt"
	"os"
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
//   - timeouts: the same on a go-redis client without it but with write
//     and read timeouts of 250 ms, which end a release within the unlock
//     timeout: Unlock runs inline there too;
//   - unfenced: the same with WithFencingTokens(false): no clock read, no
//     tail (3 nested commands less), the price of strictly increasing tokens;
//   - scripts: the same two script calls with the same keys and arguments
//     (the watchdog's lease, a final release), run directly: no registry,
//     context or watchdog;
//   - stubs: two scripts that return the same replies and run no command,
//     with the same keys and arguments: relock's round trips alone;
//   - fair: a FairLock's Lock and Unlock, as a caller runs them;
//   - seed: the seed lock's two scripts (Redisson's acquire and release Lua,
//     as bench/adapter_seed.go runs them): the reentrant lock relock is
//     measured against;
//   - floor: SET NX PX + compare-and-delete (FloorCycle).
//
// client − scripts is the Client's own work; scripts − stubs is what
// relock's scripts do inside Redis (their nested commands, see
// TestUncontendedCommandsPerCycle); stubs − floor is the price of two
// EVALSHA with relock's keys and arguments over SET and a small script.
//
// Besides ns/op, BenchmarkUncontendedParts reports script-µs/op: the time
// Redis spent inside EVALSHA per cycle (INFO commandstats), the server's
// own measure of what the scripts cost, which the round trips and the
// client do not blur.
var partsVariants = []string{"client", "inline", "timeouts", "unfenced", "scripts", "fair", "stubs", "seed", "floor"}

// partsRedis returns the go-redis client variant runs on, closed when b
// ends: one with ContextTimeoutEnabled for inline; one with 250 ms write
// and read timeouts for timeouts (Unlock inline without
// ContextTimeoutEnabled, see inline.go).
func partsRedis(srv *redistest.Server, variant string) *redis.Client {
	return srv.Client(func(o *redis.Options) {
		o.ContextTimeoutEnabled = variant == "inline"
		if variant == "timeouts" {
			o.ReadTimeout, o.WriteTimeout = 250*time.Millisecond, 250*time.Millisecond
		}
	})
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
	case "fair":
		fl := c.FairLock(name)
		return func(ctx context.Context) error {
			held, err := fl.Lock(ctx)
			if err != nil {
				return err
			}
			return fl.Unlock(held)
		}
	case "seed":
		return seedCycle(rdb, "seed:"+name, owner)
	case "client", "inline", "timeouts", "unfenced":
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

// withDeadline runs cycle under a context with timeout d of its own per
// call (none when d is 0).
func withDeadline(cycle func(context.Context) error, d time.Duration) func(context.Context) error {
	if d <= 0 {
		return cycle
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return cycle(ctx)
	}
}

// BenchmarkUncontendedParts splits an uncontended Lock+Unlock on a real
// Redis, one caller at a time, into the variants of partsVariants: where
// the latency goes, and the CPU this process spends per cycle
// (client-µs/op, getrusage; the Redis server runs elsewhere). With
// RELOCK_PARTS_DEADLINE set (a duration, "5s" say), every cycle runs under
// a context of its own with that timeout, as a service passes its
// request's; else under context.Background().
func BenchmarkUncontendedParts(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	ctx := context.Background()
	perCall, _ := time.ParseDuration(os.Getenv("RELOCK_PARTS_DEADLINE"))
	for _, variant := range partsVariants {
		b.Run(variant, func(b *testing.B) {
			rdb := rdb
			if variant == "inline" || variant == "timeouts" {
				rdb = partsRedis(srv, variant)
			}
			c := partsClient(rdb, variant)
			b.Cleanup(func() { _ = c.Close() })
			cycle := withDeadline(partsCycle(c, rdb, variant, "parts"), perCall)
			if err := cycle(ctx); err != nil { // loads the scripts
				b.Fatal(err)
			}
			b.ReportAllocs()
			calls0, usec0 := evalshaStats(b, rdb)
			client0 := processCPUOrZero()
			for b.Loop() {
				if err := cycle(ctx); err != nil {
					b.Fatal(err)
				}
			}
			// One caller at a time: a fixed -benchtime Nx makes this the
			// steadier figure of a Client's own CPU on a busy machine.
			clientCPU := processCPUOrZero() - client0
			calls1, usec1 := evalshaStats(b, rdb)
			b.ReportMetric((usec1-usec0)/float64(b.N), "script-µs/op")
			b.ReportMetric((calls1-calls0)/float64(b.N), "evalsha/op")
			b.ReportMetric(clientCPU.Seconds()*1e6/float64(b.N), "client-µs/op")
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
	d, err := redistest.CPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return d
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

// evalshaStats returns INFO commandstats' calls and microseconds of EVALSHA
// so far: the time Redis has spent running scripts called by their SHA-1.
func evalshaStats(tb testing.TB, rdb redis.UniversalClient) (calls, usec float64) {
	tb.Helper()
	info, err := redistest.Info(context.Background(), rdb, "commandstats")
	if err != nil {
		tb.Fatal(err)
	}
	// cmdstat_evalsha:calls=N,usec=U,usec_per_call=...
	for _, kv := range strings.Split(info["cmdstat_evalsha"], ",") {
		k, v, _ := strings.Cut(kv, "=")
		f, _ := strconv.ParseFloat(v, 64)
		switch k {
		case "calls":
			calls = f
		case "usec":
			usec = f
		}
	}
	return calls, usec
}

// seedAcquire and seedRelease are the seed lock's scripts, Redisson's RLock
// acquire and release as bench/adapter_seed.go runs them (see there): the
// floor of a reentrant lock's script time.
var (
	seedAcquire = redis.NewScript(`if (redis.call('exists', KEYS[1]) == 0) then ` +
		`redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; ` +
		`if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then ` +
		`redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; ` +
		`return redis.call('pttl', KEYS[1]);`)
	seedRelease = redis.NewScript(`if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; ` +
		`local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ` +
		`if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; ` +
		`else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;`)
)

// seedCycle is one uncontended cycle of the seed lock on key for owner.
func seedCycle(rdb redis.UniversalClient, key, owner string) func(context.Context) error {
	acquireKeys, releaseKeys := []string{key}, []string{key, "redisson_lock__channel:{" + key + "}"}
	return func(ctx context.Context) error {
		if err := seedAcquire.Run(ctx, rdb, acquireKeys, "30000", owner).Err(); !errors.Is(err, redis.Nil) {
			return fmt.Errorf("seed acquire: %w", err)
		}
		if got, err := seedRelease.Run(ctx, rdb, releaseKeys, "0", "30000", owner).Int64(); err != nil || got != 1 {
			return fmt.Errorf("seed release: %d %w", got, err)
		}
		return nil
	}
}

// BenchmarkScriptTime measures what BenchmarkUncontendedParts' script-µs/op
// does, the Redis time inside EVALSHA per uncontended cycle, with the cycles
// sent in pipelines of 100: the scripts then run back to back at a steady
// state, and the figure moves far less with the load of a shared machine
// (±0.3 µs, against several µs for one cycle at a time, whose scripts find
// Redis cold). Variants: lock and fair (the scripts of a Lock's and a
// FairLock's Lock+Unlock, the watchdog's lease, a final release), unfenced
// (lock with WithFencingTokens(false)), stubs (scripts returning the same
// replies with the same keys and arguments, running no command) and seed
// (Redisson's scripts, see seedCycle) and rueidislock (its acquire and
// release scripts, as rueidislock v1.0.79 sends them: the peer of the
// shared-Client target). Run with -benchtime 20000x.
func BenchmarkScriptTime(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	ctx := context.Background()
	for _, variant := range []string{"lock", "fair", "unfenced", "stubs", "seed", "rueidislock"} {
		b.Run(variant, func(b *testing.B) {
			c := New(rdb, WithFencingTokens(variant != "unfenced"))
			b.Cleanup(func() { _ = c.Close() })
			for _, s := range []*redis.Script{lockAcquireScript, lockReleaseScript, fairAcquireScript,
				fairReleaseScript, acquireStub, releaseStub, seedAcquire, seedRelease, rueidisAcquire, rueidisRelease} {
				if err := s.Load(ctx, rdb).Err(); err != nil {
					b.Fatal(err)
				}
			}
			queue := pipelinedCycle(c, variant)
			pipe := rdb.Pipeline()
			flush := func() {
				cmds, err := pipe.Exec(ctx)
				if err != nil && !errors.Is(err, redis.Nil) { // the seed's acquire replies nil
					b.Fatal(err)
				}
				for i := 1; i < len(cmds); i += 2 { // every release freed its hold
					if n, err := cmds[i].(*redis.Cmd).Int64(); err != nil || n != 1 {
						b.Fatalf("%s release: %d %v", variant, n, err)
					}
				}
			}
			calls0, usec0 := evalshaStats(b, rdb)
			n := 0
			for b.Loop() {
				queue(ctx, pipe)
				if n++; n%100 == 0 {
					flush()
				}
			}
			flush()
			calls1, usec1 := evalshaStats(b, rdb)
			b.ReportMetric((usec1-usec0)/float64(b.N), "script-µs/op")
			b.ReportMetric((calls1-calls0)/float64(b.N), "evalsha/op")
		})
	}
}

// rueidisAcquire and rueidisRelease are rueidislock's scripts (v1.0.79,
// lock.go: acqms and delkey); the GET after the SET is its client-side
// caching's tracking read.
var (
	rueidisAcquire = redis.NewScript(`local r = redis.call("SET",KEYS[1],ARGV[1],"NX","PX",ARGV[2]);redis.call("GET",KEYS[1]);return r`)
	rueidisRelease = redis.NewScript(`if redis.call("GET",KEYS[1]) == ARGV[1] then return redis.call("DEL",KEYS[1]) end;return 0`)
)

// pipelinedCycle returns a function that queues one cycle of variant (see
// BenchmarkScriptTime) on a pipeline: the acquire, then the release.
func pipelinedCycle(c *Client, variant string) func(context.Context, redis.Pipeliner) {
	owner := c.id + ":bench"
	l, fl := c.Lock("script-time"), c.FairLock("script-time")
	lease := c.opts.watchdogLease
	return func(ctx context.Context, pipe redis.Pipeliner) {
		op := c.newOp()
		var acq, rel scriptCall
		switch variant {
		case "seed":
			key := "seed:script-time"
			seedAcquire.EvalSha(ctx, pipe, []string{key}, "30000", owner)
			seedRelease.EvalSha(ctx, pipe, []string{key, "redisson_lock__channel:{" + key + "}"}, "0", "30000", owner)
			return
		case "rueidislock":
			key := "rueidislock:script-time"
			rueidisAcquire.EvalSha(ctx, pipe, []string{key}, owner, "5000")
			rueidisRelease.EvalSha(ctx, pipe, []string{key}, owner)
			return
		case "fair":
			acq = fairAcquireCall(c, fl.keys, acquireReq{owner: owner, op: op, lease: lease})
			rel = fairReleaseCall(c, fl.keys, releaseReq{owner: owner, op: c.newOp(), gen: op, final: true})
		default:
			acq = lockAcquireCall(c, l.keys, owner, acquireReq{op: op, lease: lease}, true)
			rel = lockReleaseCall(c, l.keys, owner, releaseReq{op: c.newOp(), gen: op, final: true})
		}
		if variant == "stubs" {
			acq.script, rel.script, acq.argv, rel.argv = acquireStub, releaseStub, nil, nil
		}
		acq.evalSha(ctx, pipe)
		rel.evalSha(ctx, pipe)
	}
}

// BenchmarkScriptTimeParts takes BenchmarkScriptTime's Lock cycle apart:
// each variant runs the two scripts with one part of what a guarantee
// costs taken out (the clock read behind the fencing token, the latch's
// write, the PEXPIRE that gives the free record the latch's lifetime), or
// returning once their helpers are made, or whole on a Redis that keeps
// the lock's hash a listpack however long the latch's values (listpack),
// and reports Redis's time in them per cycle. The variants are for
// measuring only: they break what they take out.
func BenchmarkScriptTimeParts(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	ctx := context.Background()
	acqSrc, relSrc := scriptSourceOf(lockAcquireScript), scriptSourceOf(lockReleaseScript)
	const free = "	latch_hset(hash, cur[7], cur[8], op)\n	redis.call('pexpire', hash, ms)"
	for _, v := range []struct {
		name             string
		acqCut, acqPaste string
		relCut, relPaste string
	}{
		{"whole", "", "", "", ""},
		{"listpack", "", "", "", ""},
		{"no-clock", "	if fencing == '1' then\n		token, text = clock_token(last)", "	if false then\n		token, text = clock_token(last)", "", ""},
		{"no-latch-write", "", "", free, "	redis.call('pexpire', hash, ms)"},
		{"no-latch-lifetime", "", "", free, "	latch_hset(hash, cur[7], cur[8], op)"},
		{"helpers-only", "local hash, owner, op = KEYS[1], ARGV[1], ARGV[2]\n", "if true then return {1, 1, 1} end\nlocal hash, owner, op = KEYS[1], ARGV[1], ARGV[2]\n",
			"local at = ARGV[8]\n", "if true then return 1 end\nlocal at = ARGV[8]\n"},
	} {
		b.Run(v.name, func(b *testing.B) {
			if v.name == "listpack" {
				setHashListpackValue(b, rdb, "1024")
				b.Cleanup(func() { setHashListpackValue(b, rdb, "64") })
			}
			acq, rel := redis.NewScript(cutPaste(b, acqSrc, v.acqCut, v.acqPaste)), redis.NewScript(cutPaste(b, relSrc, v.relCut, v.relPaste))
			for _, s := range []*redis.Script{acq, rel} {
				if err := s.Load(ctx, rdb).Err(); err != nil {
					b.Fatal(err)
				}
			}
			c := New(rdb)
			b.Cleanup(func() { _ = c.Close() })
			owner, l, lease := c.id+":bench", c.Lock("script-parts-"+v.name), c.opts.watchdogLease
			pipe := rdb.Pipeline()
			calls0, usec0 := evalshaStats(b, rdb)
			n := 0
			for b.Loop() {
				op := c.newOp()
				a := lockAcquireCall(c, l.keys, owner, acquireReq{op: op, lease: lease}, true)
				r := lockReleaseCall(c, l.keys, owner, releaseReq{op: c.newOp(), gen: op, final: true})
				a.script, r.script, a.argv, r.argv = acq, rel, nil, nil
				a.evalSha(ctx, pipe)
				r.evalSha(ctx, pipe)
				if n++; n%100 == 0 {
					if _, err := pipe.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			calls1, usec1 := evalshaStats(b, rdb)
			b.ReportMetric((usec1-usec0)/float64(b.N), "script-µs/op")
			b.ReportMetric((calls1-calls0)/float64(b.N), "evalsha/op")
		})
	}
}

// setHashListpackValue sets Redis's hash-max-listpack-value.
func setHashListpackValue(tb testing.TB, rdb redis.UniversalClient, v string) {
	if err := rdb.ConfigSet(context.Background(), "hash-max-listpack-value", v).Err(); err != nil {
		tb.Fatal(err)
	}
}

// cutPaste replaces cut in src by paste ("" cut: src as it is), failing tb
// when src no longer has cut.
func cutPaste(tb testing.TB, src, cut, paste string) string {
	if cut == "" {
		return src
	}
	if !strings.Contains(src, cut) {
		tb.Fatalf("the script no longer has %q", cut)
	}
	return strings.Replace(src, cut, paste, 1)
}
