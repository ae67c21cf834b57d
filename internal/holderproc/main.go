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
// internal/schedule): a lock's holds, a Semaphore's holds, SetPermits and
// crowd of waiters (sched_sema.go), or a CountDownLatch's rounds
// (sched_latch.go).
//
// With -kind latch it waits for a CountDownLatch, or counts one down (-role,
// see latchRole). With -kind deadlock it takes two of the names of -name
// (comma-separated) in random orders for -for (see runDeadlock).
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

// config is the process's flags.
type config struct {
	addr, name, role, plan    string
	lease                     time.Duration
	cluster, classic          bool
	permits, take, goroutines int
	w                         worker
}

func main() {
	cfg := parseFlags()
	if code, err := cfg.run(); err != nil {
		fmt.Fprintln(os.Stderr, "holderproc:", err)
		os.Exit(code)
	}
}

// parseFlags reads the command line.
func parseFlags() *config {
	cfg := &config{}
	w := &cfg.w
	flag.StringVar(&cfg.addr, "addr", "", "Redis address")
	flag.StringVar(&cfg.name, "name", "", "lock name")
	flag.DurationVar(&cfg.lease, "lease", 30*time.Second, "watchdog lease (relock's default is 30s)")
	flag.BoolVar(&cfg.cluster, "cluster", false, "-addr lists the nodes of a Redis Cluster")
	flag.BoolVar(&cfg.classic, "classic", false, "with -cluster: classic pub/sub (WithShardedPubSub(false))")
	flag.StringVar(&w.judge, "judge", "", "worker mode: the judge's address (host:port) to report to")
	flag.StringVar(&w.id, "id", "", "worker mode: the name this process reports under (default p<pid>)")
	flag.StringVar(&w.kind, "kind", "lock", "lock type: lock, fair or write")
	flag.DurationVar(&w.hold, "hold", 100*time.Millisecond, "worker mode: how long each hold lasts")
	flag.DurationVar(&w.wait, "wait", 30*time.Second, "worker mode: TryLock wait per attempt")
	flag.IntVar(&w.n, "n", 0, "worker mode: stop after this many holds (0: no limit)")
	flag.DurationVar(&w.runFor, "for", 0, "worker mode: stop starting holds after this long (0: no limit)")
	flag.IntVar(&cfg.permits, "permits", 5, "-kind sema: the semaphore's capacity")
	flag.IntVar(&cfg.take, "take", 1, "-kind sema: permits per acquisition (worker mode: 1 to take, at random)")
	flag.StringVar(&cfg.role, "role", "wait", "-kind latch: wait (print when the latch opens) or count (count down on a line from stdin)")
	flag.IntVar(&cfg.goroutines, "goroutines", 8, "-kind sema, worker mode: goroutines acquiring at once")
	flag.StringVar(&cfg.plan, "plan", "", "fault-schedule mode: the schedule.Plan (JSON) this process plays as -id; -addr lists the servers, comma-separated")
	flag.Parse()
	return cfg
}

// run plays the mode the flags chose; on failure, code is the exit status.
func (cfg *config) run() (code int, err error) {
	w := &cfg.w
	if cfg.plan != "" {
		return 1, runSchedule(cfg.plan, w.id, w.judge, cfg.addr)
	}
	if w.judge != "" {
		w.addr, w.name, w.lease = cfg.addr, cfg.name, cfg.lease
		run := w.run
		if w.kind == "sema" {
			run = (&semaWorker{worker: w, permits: cfg.permits, goroutines: cfg.goroutines, take: cfg.take}).run
		}
		return 1, run()
	}
	if w.kind == "deadlock" {
		return 1, runDeadlock(cfg)
	}
	c := cfg.client()
	w.name = cfg.name
	switch w.kind {
	case "latch":
		return 1, latchRole(c, w.name, cfg.role)
	case "sema":
		return 1, holdPermits(c, w.name, cfg.permits, cfg.take)
	}
	return holdUntilKilled(c, w)
}

// client makes the relock Client of the single-hold modes.
func (cfg *config) client() *relock.Client {
	var rdb redis.UniversalClient = redis.NewClient(&redis.Options{Addr: cfg.addr})
	if cfg.cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cfg.addr, ",")})
	}
	opts := []relock.Option{relock.WithWatchdogLease(cfg.lease)}
	if cfg.classic {
		opts = append(opts, relock.WithShardedPubSub(false))
	}
	return relock.New(rdb, opts...)
}

// holdUntilKilled takes w's lock, prints "locked <token> <owner>" and keeps
// it, renewed, until the process is killed; when the hold ends first it
// says so and keeps the process alive, so that the test decides when it
// ends.
func holdUntilKilled(c *relock.Client, w *worker) (int, error) {
	l, err := w.open(c)
	if err != nil {
		return 2, err
	}
	ctx, err := l.TryLock(context.Background(), relock.WaitForever, 0)
	if err != nil {
		return 1, err
	}
	tok, err := l.Token(ctx)
	if err != nil {
		return 1, err
	}
	id, _ := relock.OwnerOf(ctx)
	fmt.Printf("locked %d %s:%s\n", tok, c.ID(), id)
	<-ctx.Done() // held, and renewed, until killed
	fmt.Fprintln(os.Stderr, "holderproc: hold ended:", context.Cause(ctx))
	time.Sleep(time.Hour)
	return 0, nil
}
