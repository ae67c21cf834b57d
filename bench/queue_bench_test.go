//go:build unix

package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// BenchmarkQueuePeers puts relock's waiting beside the seed lock's as the
// queue grows: W waiters, each with a Locker of its own (as W processes
// would have), wait for one held key. It reports the Redis time in scripts
// (INFO commandstats, EVALSHA and EVAL, their own commands included) per
// waiter while they queue (enqueue-µs: every attempt a waiter makes before
// it sleeps), and per hand-over while the queue
// drains, each new holder releasing at once (handover-µs). relock queues
// its waiters in Redis and hands the lock to the head inside the release;
// the seed lock's waiters subscribe and every process retries at each
// release, so its hand-over grows with the waiters. Queue lengths come from
// RELOCK_SCALE_WAITERS (default 1,10,100,1000).
//
//	RELOCK_REQUIRE_REDIS=1 go test -run '^$' -bench BenchmarkQueuePeers -benchtime 1x
func BenchmarkQueuePeers(b *testing.B) {
	srv := redistest.Start(b)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = admin.Close() })
	run := 0
	// Deadlock detection off: past its first second of waiting a waiter
	// inspects the lock it waits for (a script call per check), which is
	// the detection's cost, not the queue's.
	noDetection := relock.WithDeadlockDetection(0)
	libs := []Library{
		seedLibrary(),
		relockKind("relock", "", func(c *relock.Client, n string) relockLock { return c.Lock(n) }, noDetection),
		relockKind("relock-fair", "", func(c *relock.Client, n string) relockLock { return c.FairLock(n) }, noDetection),
	}
	for _, lib := range libs {
		for _, w := range queueLengths(b) {
			b.Run(fmt.Sprintf("%s/waiters=%d", lib.Name, w), func(b *testing.B) {
				for range b.N {
					run++
					enq, calls, hand := queueCosts(b, admin, srv.Addr(), lib, "queue"+strconv.Itoa(run), w)
					b.ReportMetric(enq, "enqueue-µs")
					b.ReportMetric(calls, "enqueue-calls")
					b.ReportMetric(hand, "handover-µs")
				}
			})
		}
	}
}

// queueLengths reads RELOCK_SCALE_WAITERS.
func queueLengths(b *testing.B) []int {
	spec := os.Getenv("RELOCK_SCALE_WAITERS")
	if spec == "" {
		spec = "1,10,100,1000"
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("RELOCK_SCALE_WAITERS: %q is not a queue length", f)
		}
		out = append(out, n)
	}
	return out
}

// queueCosts runs one queue of w waiters on a fresh key and returns the
// script time per enqueue (µs), the script calls per enqueue and the script
// time per hand-over (µs).
func queueCosts(b *testing.B, admin *redis.Client, addr string, lib Library, prefix string, w int) (enqueue, calls, handover float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lockers := make([]Locker, w+1)
	for i := range lockers {
		l, err := lib.New(addr, prefix, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		lockers[i] = l
	}
	held, err := lockers[0].Lock(ctx, "k")
	if err != nil {
		b.Fatal(err)
	}
	calls0, script0 := scriptStats(b, admin)
	handed := make(chan Unlocker)
	errs := make(chan error, w)
	for _, l := range lockers[1:] {
		go func() {
			u, err := l.Lock(ctx, "k")
			if err != nil {
				errs <- err
				return
			}
			handed <- u
		}()
	}
	// Every waiter makes at least one attempt, and a waiter may make a
	// second once it listens for its turn: the queue is complete once w
	// calls have run and no more come for quiet.
	const quiet = 200 * time.Millisecond
	last, since := int64(-1), time.Now()
	for {
		calls, _ := scriptStats(b, admin)
		if calls != last {
			last, since = calls, time.Now()
		} else if calls >= calls0+int64(w) && time.Since(since) >= quiet {
			break
		}
		select {
		case err := <-errs:
			b.Fatal(err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	calls1, script1 := scriptStats(b, admin)
	for range w {
		if err := held.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case held = <-handed:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
	_, script2 := scriptStats(b, admin)
	perWaiter := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(w) }
	return perWaiter(script1 - script0), float64(calls1-calls0) / float64(w), perWaiter(script2 - script1)
}

// scriptStats returns the script calls (EVALSHA and EVAL) the server has
// run and the time they took (INFO commandstats).
func scriptStats(b *testing.B, rdb *redis.Client) (calls int64, spent time.Duration) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var usec int64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k != "cmdstat_evalsha" && k != "cmdstat_eval" {
			continue
		}
		for _, field := range strings.Split(v, ",") {
			name, value, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(value, 10, 64)
			switch name {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, time.Duration(usec) * time.Microsecond
}
