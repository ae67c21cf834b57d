//go:build unix

package bench

import (
	"context"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/redistest"
)

// BenchmarkSharedClientPeers is scenario 6 (64 goroutines, each on its own
// key, sharing Lockers: 2, as the comparison's default -clients) as a Go
// benchmark, for relock beside its peers on one server, with ContextTimeout
// set as the comparison sets it by default. Per cycle it reports the CPU
// Redis used (INFO cpu) and the CPU this process used (getrusage): where a
// library's cycle costs, on either side, and of Redis's the part its
// scripts take (script-µs/op).
func BenchmarkSharedClientPeers(b *testing.B) {
	srv := redistest.Start(b)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = admin.Close() })
	contextTimeout.Store(true)
	var run int
	for _, lib := range []Library{relockLibrary(), relockFairLibrary(), rueidislockLibrary(), seedLibrary()} {
		b.Run(lib.Name, func(b *testing.B) {
			const workers, clients = 64, 2
			// A fresh prefix each time RunParallel runs again: a key a Locker
			// of an earlier run left behind would hold up this run's.
			run++
			prefix := "peers" + strconv.Itoa(run)
			lockers := make([]Locker, clients)
			for i := range lockers {
				l, err := lib.New(srv.Addr(), prefix, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = l.Close() }()
				lockers[i] = l
			}
			var next atomic.Int32
			redis0, client0, script0 := serverCPU(b, admin), selfCPU(), scriptTime(b, admin)
			b.SetParallelism(workers / 2) // × GOMAXPROCS: one goroutine per worker on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1))
				locker, name := lockers[i%clients], "k"+strconv.Itoa(i)
				ctx := context.Background()
				for pb.Next() {
					h, err := locker.Lock(ctx, name)
					if err == nil {
						err = h.Unlock(ctx)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric((serverCPU(b, admin)-redis0).Seconds()*1e6/n, "redis-µs/op")
			b.ReportMetric((selfCPU()-client0).Seconds()*1e6/n, "client-µs/op")
			b.ReportMetric((scriptTime(b, admin)-script0).Seconds()*1e6/n, "script-µs/op")
		})
	}
}

// serverCPU returns the CPU time (user + system) the server has used.
func serverCPU(b *testing.B, rdb *redis.Client) time.Duration {
	d, err := redistest.CPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// scriptTime is the time the server has spent running EVALSHA and EVAL
// commands (INFO commandstats): the part of its CPU the scripts take, the
// rest being reading, parsing and answering commands.
func scriptTime(b *testing.B, rdb *redis.Client) time.Duration {
	_, spent := scriptStats(b, rdb)
	return spent
}

// selfCPU is the CPU time (user + system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
