package relock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/redistest"
)

// The benchmarks of this file measure how Redis's cost grows with a lock's
// holders and waiters: Redis time inside the scripts, per script, from the
// slow log with a threshold of 0 (every EVALSHA is logged with its SHA-1
// and its run time in µs). Redis time, not wall time: it is what a busy
// lock costs the server, and it moves little with the load of the machine.
// Run with -benchtime 1x: each sub-benchmark sets up its holders and
// waiters once and measures a fixed number of operations.

// scriptCost is the Redis time and calls of one script.
type scriptCost struct {
	calls int
	usec  int64
}

func (s scriptCost) per() float64 {
	if s.calls == 0 {
		return 0
	}
	return float64(s.usec) / float64(s.calls)
}

// startLogged starts a redis-server that logs every command in its slow
// log (up to a million entries).
func startLogged(b *testing.B) *redis.Client {
	srv := redistest.Start(b, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "1000000")
	return srv.Client()
}

// resetLog empties the slow log.
func resetLog(b *testing.B, rdb *redis.Client) {
	if err := rdb.Do(context.Background(), "slowlog", "reset").Err(); err != nil {
		b.Fatal(err)
	}
}

// scriptCosts reads the slow log: Redis time and calls per script SHA-1.
func scriptCosts(b *testing.B, rdb *redis.Client) map[string]scriptCost {
	logs, err := rdb.SlowLogGet(context.Background(), -1).Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]scriptCost{}
	for _, l := range logs {
		if len(l.Args) < 2 || l.Args[0] != "evalsha" && l.Args[0] != "EVALSHA" {
			continue
		}
		c := out[l.Args[1]]
		c.calls++
		c.usec += l.Duration.Microseconds()
		out[l.Args[1]] = c
	}
	return out
}

// BenchmarkScaleSemaphoreHolders is one Acquire(1)+Release of a Semaphore
// while others holders hold 1 permit each (the capacity leaves one free):
// Redis µs of the acquire and of the release scripts per cycle.
func BenchmarkScaleSemaphoreHolders(b *testing.B) {
	for _, others := range []int{1, 512, 2047} {
		b.Run(fmt.Sprintf("holders=%d", others), func(b *testing.B) {
			rdb := startLogged(b)
			ctx := context.Background()
			c := New(rdb, WithLogger(slog.New(slog.DiscardHandler)))
			b.Cleanup(func() { _ = c.Close() })
			s := c.Semaphore("scale", others+1)
			for range others {
				if _, err := s.TryAcquire(ctx, 1, 0, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			const cycles = 200
			resetLog(b, rdb)
			for b.Loop() {
				for range cycles {
					h, err := s.TryAcquire(ctx, 1, 0, 0)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Release(h); err != nil {
						b.Fatal(err)
					}
				}
			}
			costs := scriptCosts(b, rdb)
			acq, rel := costs[semaAcquireScript.Hash()], costs[semaReleaseScript.Hash()]
			b.ReportMetric(acq.per(), "acquire-µs")
			b.ReportMetric(rel.per(), "release-µs")
			b.ReportMetric(acq.per()+rel.per(), "redis-µs/cycle")
		})
	}
}

// queueKind is a lock whose waiters queue, as BenchmarkScaleLockQueue
// drives it: its Lock and Unlock on one Client, the scripts of its acquire
// and release, and its queue's length as Inspect shows it.
type queueKind struct {
	name             string
	open             func(c *Client) tokenLock
	acquire, release *redis.Script
	queued           func(st *inspect.State) int
}

var queueKinds = []queueKind{
	{"Lock", func(c *Client) tokenLock { return c.Lock("scale") }, lockAcquireScript, lockReleaseScript,
		func(st *inspect.State) int {
			if st.Lock == nil {
				return 0
			}
			return len(st.Lock.Queued)
		}},
	{"FairLock", func(c *Client) tokenLock { return c.FairLock("scale") }, fairAcquireScript, fairReleaseScript,
		func(st *inspect.State) int {
			if st.FairLock == nil {
				return 0
			}
			return len(st.FairLock.Waiters)
		}},
	{"WriteLock", func(c *Client) tokenLock { return c.RWLock("scale").WriteLock() }, rwWriteAcquireScript, rwReleaseScript,
		func(st *inspect.State) int {
			if st.RWLock == nil {
				return 0
			}
			return len(st.RWLock.WritersWaiting)
		}},
}

// BenchmarkScaleLockQueue keeps waiters+1 goroutines (over 4 Clients)
// cycling Lock then Unlock on one Lock, FairLock or RWLock's write lock, so
// that about waiters wait at any time: Redis µs per acquire attempt (mostly
// an enqueue at the tail) and per release (a hand-over to the head), over
// 400 hand-overs. RELOCK_SCALE_WAITERS (a comma-separated list) sets the
// queue lengths, 10 and 1000 by default.
func BenchmarkScaleLockQueue(b *testing.B) {
	sizes := []int{10, 1000}
	if env := os.Getenv("RELOCK_SCALE_WAITERS"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("RELOCK_SCALE_WAITERS: %q is no queue length", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, kind := range queueKinds {
		for _, waiters := range sizes {
			b.Run(fmt.Sprintf("%s/waiters=%d", kind.name, waiters), func(b *testing.B) {
				rdb := startLogged(b)
				clients := make([]*Client, 4)
				for i := range clients {
					clients[i] = New(rdb, WithLogger(slog.New(slog.DiscardHandler)))
					b.Cleanup(func() { _ = clients[i].Close() })
				}
				for b.Loop() {
					acq, rel := runQueue(b, rdb, kind, clients, waiters, 400)
					b.ReportMetric(acq.per(), "enqueue-µs")
					b.ReportMetric(rel.per(), "handover-µs")
				}
			})
		}
	}
}

// runQueue runs the cycle of BenchmarkScaleLockQueue until handovers
// releases were measured once the queue has reached waiters-1 entries.
func runQueue(b *testing.B, rdb *redis.Client, kind queueKind, clients []*Client, waiters, handovers int) (acq, rel scriptCost) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var released atomic.Int64
	for i := range waiters + 1 {
		l := kind.open(clients[i%len(clients)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				h, err := l.Lock(ctx)
				if err != nil {
					if !errors.Is(err, ErrNotObtained) {
						b.Error(err)
					}
					return
				}
				// An Unlock not confirmed in time (2 cores, a thousand
				// goroutines) goes on in the background: not a failure.
				if err := l.Unlock(h); err != nil && !errors.Is(err, ErrUnavailable) {
					b.Error(err)
					return
				}
				released.Add(1)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		st, err := clients[0].Inspect(ctx, "scale")
		if err != nil {
			b.Fatal(err)
		}
		if kind.queued(st) >= waiters-1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the waiters did not queue")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resetLog(b, rdb)
	for start := released.Load(); released.Load()-start < int64(handovers); {
		time.Sleep(time.Millisecond)
	}
	costs := scriptCosts(b, rdb)
	return costs[kind.acquire.Hash()], costs[kind.release.Hash()]
}

// BenchmarkScaleSemaphoreIdle queues 512 waiters (over 4 Clients) on a
// Semaphore whose one permit stays held, and measures over 10 s what they
// cost Redis while nothing happens: CPU (INFO cpu) in percent of one core,
// script calls per second and Redis µs per call; then how long the head
// waits for the permit once it is released (wall time).
func BenchmarkScaleSemaphoreIdle(b *testing.B) {
	const waiters, window = 512, 10 * time.Second
	rdb := startLogged(b)
	ctx, cancel := context.WithCancel(context.Background())
	clients := make([]*Client, 4)
	for i := range clients {
		clients[i] = New(rdb, WithLogger(slog.New(slog.DiscardHandler)))
		b.Cleanup(func() { _ = clients[i].Close() })
	}
	s := clients[0].Semaphore("idle", 1)
	held, err := s.Acquire(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan time.Time, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := clients[i%len(clients)].Semaphore("idle", 1).Acquire(ctx, 1)
			if err == nil {
				served <- time.Now() // and holds until its Client closes
				return
			}
			if !errors.Is(err, ErrNotObtained) {
				b.Error("a waiter ended otherwise than by its context:", err)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	for deadline := time.Now().Add(time.Minute); ; {
		st, err := s.State(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if st.Waiters == waiters {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d waiters queued", st.Waiters, waiters)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for b.Loop() {
		resetLog(b, rdb)
		cpu0, err := redistest.CPU(ctx, rdb)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(window)
		cpu1, err := redistest.CPU(ctx, rdb)
		if err != nil {
			b.Fatal(err)
		}
		costs := scriptCosts(b, rdb)
		var all scriptCost
		for _, c := range costs {
			all.calls += c.calls
			all.usec += c.usec
		}
		b.ReportMetric(100*(cpu1-cpu0).Seconds()/window.Seconds(), "redis-cpu-%")
		b.ReportMetric(float64(all.calls)/window.Seconds(), "calls/s")
		b.ReportMetric(all.per(), "µs/call")
	}
	// Head service: the release hands the permit to the head at once.
	released := time.Now()
	if err := s.Release(held); err != nil {
		b.Fatal(err)
	}
	select {
	case at := <-served:
		b.ReportMetric(float64(at.Sub(released).Microseconds())/1000, "head-service-ms")
	case <-time.After(10 * time.Second):
		b.Fatal("no waiter was served")
	}
}
