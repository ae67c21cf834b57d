// Command holderproc is a relock holder in a process of its own, for the
// tests that need a real process to kill or stop.
//
// By default it takes a relock Lock (or, with -kind, a FairLock, an
// RWLock's write lock or -take permits of a Semaphore) and holds it until it is killed: the process whose
// SIGKILL the fault tests inflict. It prints one line, "locked <token>
// <owner field>", once it holds the lock. With -cluster it talks to a Redis
// Cluster (-addr: a comma-separated list of nodes), with -classic using
// classic pub/sub there.
//
// With -judge it is a worker of the multi-process safety run (see worker.go):
// it takes and releases the lock in a loop and reports every enter, exit and
// lost hold, with its fencing token and the time, to the judge listening at
// that address. With -kind sema, -goroutines goroutines each take 1 to -take
// permits in a loop and report as "<id>.g<i>", with the permits as token.
// With -plan it plays one process of a fault schedule (see sched.go and
// internal/schedule).
//
// With -kind latch it waits for a CountDownLatch, or counts one down (-role,
// see latchRole).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func main() {
	addr := flag.String("addr", "", "Redis address")
	name := flag.String("name", "", "lock name")
	lease := flag.Duration("lease", 30*time.Second, "watchdog lease (relock's default is 30s)")
	cluster := flag.Bool("cluster", false, "-addr lists the nodes of a Redis Cluster")
	classic := flag.Bool("classic", false, "with -cluster: classic pub/sub (WithShardedPubSub(false))")
	var w worker
	flag.StringVar(&w.judge, "judge", "", "worker mode: the judge's address (host:port) to report to")
	flag.StringVar(&w.id, "id", "", "worker mode: the name this process reports under (default p<pid>)")
	flag.StringVar(&w.kind, "kind", "lock", "lock type: lock, fair or write")
	flag.DurationVar(&w.hold, "hold", 100*time.Millisecond, "worker mode: how long each hold lasts")
	flag.DurationVar(&w.wait, "wait", 30*time.Second, "worker mode: TryLock wait per attempt")
	flag.IntVar(&w.n, "n", 0, "worker mode: stop after this many holds (0: no limit)")
	flag.DurationVar(&w.runFor, "for", 0, "worker mode: stop starting holds after this long (0: no limit)")
	permits := flag.Int("permits", 5, "-kind sema: the semaphore's capacity")
	take := flag.Int("take", 1, "-kind sema: permits per acquisition (worker mode: 1 to take, at random)")
	role := flag.String("role", "wait", "-kind latch: wait (print when the latch opens) or count (count down on a line from stdin)")
	goroutines := flag.Int("goroutines", 8, "-kind sema, worker mode: goroutines acquiring at once")
	plan := flag.String("plan", "", "fault-schedule mode: the schedule.Plan (JSON) this process plays as -id; -addr lists the servers, comma-separated")
	flag.Parse()

	if *plan != "" {
		if err := runSchedule(*plan, w.id, w.judge, *addr); err != nil {
			fmt.Fprintln(os.Stderr, "holderproc:", err)
			os.Exit(1)
		}
		return
	}
	if w.judge != "" {
		w.addr, w.name, w.lease = *addr, *name, *lease
		run := w.run
		if w.kind == "sema" {
			run = (&semaWorker{worker: &w, permits: *permits, goroutines: *goroutines, take: *take}).run
		}
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, "holderproc:", err)
			os.Exit(1)
		}
		return
	}

	var rdb redis.UniversalClient = redis.NewClient(&redis.Options{Addr: *addr})
	if *cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(*addr, ",")})
	}
	opts := []relock.Option{relock.WithWatchdogLease(*lease)}
	if *classic {
		opts = append(opts, relock.WithShardedPubSub(false))
	}
	c := relock.New(rdb, opts...)
	w.name = *name
	if w.kind == "latch" {
		if err := latchRole(c, w.name, *role); err != nil {
			fmt.Fprintln(os.Stderr, "holderproc:", err)
			os.Exit(1)
		}
		return
	}
	if w.kind == "sema" {
		if err := holdPermits(c, w.name, *permits, *take); err != nil {
			fmt.Fprintln(os.Stderr, "holderproc:", err)
			os.Exit(1)
		}
		return
	}
	l, err := w.open(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderproc:", err)
		os.Exit(2)
	}
	ctx, err := l.TryLock(context.Background(), relock.WaitForever, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderproc:", err)
		os.Exit(1)
	}
	tok, err := l.Token(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderproc:", err)
		os.Exit(1)
	}
	id, _ := relock.OwnerOf(ctx)
	fmt.Printf("locked %d %s:%s\n", tok, c.ID(), id)
	<-ctx.Done() // held, and renewed, until killed
	fmt.Fprintln(os.Stderr, "holderproc: hold ended:", context.Cause(ctx))
	time.Sleep(time.Hour)
}
