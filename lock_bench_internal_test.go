package relock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/redistest"
)

// BenchmarkUncontendedParts splits an uncontended Lock+Unlock on a real Redis
// into what Redis does and what the Client adds, against the floor (SET NX
// PX + a compare-and-delete script) on the same server:
//
//   - client: Lock and Unlock, as a caller runs them;
//   - scripts: the same two script calls with the same keys and arguments,
//     run directly (no registry, context or watchdog);
//   - stubs: two scripts that return the same replies and run no command,
//     with the same keys and arguments (the cost of the round trips alone);
//   - floor: SET NX PX + compare-and-delete.
//
// client − scripts is the Client's own work; scripts − stubs is the time
// Redis spends in relock's scripts (their nested commands, see
// TestUncontendedCommandsPerCycle); stubs − floor is the round trips'.
func BenchmarkUncontendedParts(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	c := New(rdb)
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	l := c.Lock("parts")
	owner := c.id + ":bench"
	acquireStub := redis.NewScript(`return {1, 0, 1}`)
	releaseStub := redis.NewScript(`return 1`)
	scripts := func(stub bool) {
		op := c.newOp()
		acq := lockAcquireCall(c, l.keys, owner, acquireReq{op: op}, true)
		rel := lockReleaseCall(c, l.keys, owner, releaseReq{op: c.newOp(), gen: op, final: true})
		if stub {
			acq.script, rel.script = acquireStub, releaseStub
		}
		if err := acq.run(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		if err := rel.run(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name  string
		cycle func()
	}{
		{"client", func() {
			held, err := l.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(held); err != nil {
				b.Fatal(err)
			}
		}},
		{"scripts", func() { scripts(false) }},
		{"stubs", func() { scripts(true) }},
		{"floor", func() {
			if err := FloorCycle(ctx, rdb); err != nil {
				b.Fatal(err)
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bc.cycle() // loads the scripts
			b.ReportAllocs()
			for b.Loop() {
				bc.cycle()
			}
		})
	}
}

// FloorCycle is one uncontended cycle of the floor every Redis lock is
// measured against (here and in BenchmarkLockUnlock): SET NX PX, then a
// compare-and-delete script.
func FloorCycle(ctx context.Context, rdb redis.UniversalClient) error {
	ok, err := rdb.SetNX(ctx, "floor", "token", 30*time.Second).Result()
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("floor: the key is held")
	}
	return floorRelease.Run(ctx, rdb, []string{"floor"}, "token").Err()
}

var floorRelease = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
