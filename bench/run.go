package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/redistest"
)

// Config is one benchmark run.
type Config struct {
	Addr      string        // Redis host:port, shared by every library
	Duration  time.Duration // of one library's run of one scenario, per round
	Rounds    int           // each round runs every scenario for every library
	Clients   int           // Lockers ("processes") per library in the shared-Client scenarios (Scenario.Processes 0)
	Libraries []Library     // default Libraries()
	Scenarios []Scenario    // default Scenarios()
	Progress  io.Writer     // one line per run; nil for none
	// ContextTimeout sets go-redis's ContextTimeoutEnabled on the go-redis
	// client of every library that uses one (all but rueidislock), alike:
	// the client then bounds each command by its context's deadline itself,
	// and relock's Unlock runs its release on the caller's goroutine
	// instead of a goroutine of its own.
	ContextTimeout bool
}

// Report is a run's results and what they were measured on.
type Report struct {
	Config       Config
	RedisVersion string
	GoVersion    string
	CPUs         int
	Versions     map[string]string // module path → version, of the libraries compared
	// Results[scenario ID][library name]
	Results map[string]map[string]*Result
}

// Result returns the result of lib in scenario id, or nil.
func (r *Report) Result(id, lib string) *Result { return r.Results[id][lib] }

// keyRoot starts every key of every run, so that cleanup finds them all.
const keyRoot = "relockbench:"

// Run runs every scenario for every library, Rounds times. Within a round,
// each scenario runs the libraries one after the other, starting one library
// later each round, so that no library always runs first or last. Each run
// gets fresh Lockers (connections), a key prefix of its own that is deleted
// afterwards, and its own INFO commandstats delta.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	contextTimeout.Store(cfg.ContextTimeout)
	admin := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer admin.Close()
	rep := &Report{
		Config:    cfg,
		GoVersion: runtime.Version(),
		CPUs:      runtime.NumCPU(),
		Versions:  moduleVersions(),
		Results:   make(map[string]map[string]*Result),
	}
	info, err := admin.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("bench: Redis at %s: %w", cfg.Addr, err)
	}
	rep.RedisVersion = infoField(info, "redis_version")

	seq := 0
	for round := range cfg.Rounds {
		for _, sc := range cfg.Scenarios {
			n := len(cfg.Libraries)
			for i := range n {
				lib := cfg.Libraries[(i+round)%n]
				if !sc.runs(lib.Name) {
					continue
				}
				seq++
				prefix := fmt.Sprintf("%s%d:", keyRoot, seq)
				res, err := runOne(ctx, admin, cfg, sc, lib, prefix)
				if err != nil {
					return nil, fmt.Errorf("bench: %s, %s: %w", sc.ID, lib.Name, err)
				}
				fmt.Fprintf(cfg.Progress, "round %d  %-12s %-12s %8.0f ops/s  violations %d  errors %d\n",
					round+1, sc.ID, lib.Name, res.Rate(), res.Violations, res.Errors)
				if rep.Results[sc.ID] == nil {
					rep.Results[sc.ID] = make(map[string]*Result)
				}
				if prev := rep.Results[sc.ID][lib.Name]; prev != nil {
					prev.merge(res)
				} else {
					rep.Results[sc.ID][lib.Name] = res
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
		}
	}
	return rep, nil
}

// withDefaults is cfg with what was left unset filled in.
func (cfg Config) withDefaults() Config {
	if cfg.Libraries == nil {
		cfg.Libraries = Libraries()
	}
	if cfg.Scenarios == nil {
		cfg.Scenarios = Scenarios()
	}
	cfg.Rounds = max(1, cfg.Rounds)
	cfg.Clients = max(1, cfg.Clients)
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	return cfg
}

// runOne runs one scenario for one library.
func runOne(ctx context.Context, admin *redis.Client, cfg Config, sc Scenario, lib Library, prefix string) (*Result, error) {
	defer cleanup(admin, prefix)
	counter := &Counter{}
	n := sc.processes(cfg.Clients)
	lockers := make([]Locker, 0, n)
	defer func() { closeAll(lockers) }() // the lockers made so far
	for range n {
		l, err := lib.New(cfg.Addr, prefix, counter)
		if err != nil {
			return nil, err
		}
		lockers = append(lockers, l)
		if err := warmUp(ctx, l, max(1, sc.Depth)); err != nil {
			return nil, err
		}
	}
	// What the warm-ups started in the background (subscriptions, client
	// tracking) must not land in the measured window.
	before, err := settle(ctx, admin)
	if err != nil {
		return nil, err
	}
	sent := counter.Sent()

	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	res := workload(rctx, sc, lockers)
	cancel()

	after, err := redistest.CommandCalls(ctx, admin)
	if err != nil {
		return nil, err
	}
	server, conn := statsDelta(before, after)
	res.Library = lib.Name
	res.Sent = counter.Sent() - sent + conn
	res.Server = server
	return res, nil
}

// warmUp connects l and loads its scripts outside the measured window: it
// locks and unlocks a key of its own. An attempt that takes longer than
// warmUpTimeout is given up and tried again: under load, rueidislock's
// acquire can time out (its 20 ms TryNextAfter) on a free key, after which
// its Lock waits for an invalidation that nothing sends (seen: a smoke test
// stuck for minutes in the warm-up).
func warmUp(ctx context.Context, l Locker, depth int) error {
	var err error
	for range warmUpTries {
		wctx, cancel := context.WithTimeout(ctx, warmUpTimeout)
		var u []Unlocker
		if u, err = lock(wctx, l, "warmup", depth); err == nil {
			err = unlock(u)
			cancel()
			if err != nil {
				return fmt.Errorf("warm-up unlock: %w", err)
			}
			return nil
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("warm-up lock, %d tries: %w", warmUpTries, err)
}

const (
	warmUpTries   = 3
	warmUpTimeout = 3 * time.Second
)

// closeAll closes every Locker of a run, all at once: with 64 processes,
// closing them one by one would add their shutdowns (subscribers, watchdogs,
// connections) up.
func closeAll(lockers []Locker) {
	var wg sync.WaitGroup
	for _, l := range lockers {
		wg.Go(func() { _ = l.Close() })
	}
	wg.Wait()
}

// settle returns INFO commandstats once Redis ran no command (INFO aside)
// between two readings settleEvery apart, or after settleMax.
func settle(ctx context.Context, admin *redis.Client) (map[string]int64, error) {
	prev, err := redistest.CommandCalls(ctx, admin)
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(settleMax); time.Now().Before(deadline); {
		time.Sleep(settleEvery)
		cur, err := redistest.CommandCalls(ctx, admin)
		if err != nil {
			return nil, err
		}
		if n, _ := statsDelta(prev, cur); n == 0 {
			return cur, nil
		}
		prev = cur
	}
	return prev, nil
}

const (
	settleEvery = 5 * time.Millisecond
	settleMax   = 500 * time.Millisecond
)

// cleanup deletes the run's keys (relock's unlock latches and fencing
// counters, expired or not), outside the measured window.
func cleanup(admin *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := admin.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	batch := make([]string, 0, 1000)
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == cap(batch) {
			admin.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		admin.Unlink(ctx, batch...)
	}
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return "?"
}

// moduleVersions reads the compared libraries' versions from the binary's
// build information.
func moduleVersions() map[string]string {
	out := make(map[string]string)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	for _, m := range bi.Deps {
		switch m.Path {
		case "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock",
			"github.com/redis/rueidis", "github.com/redis/go-redis/v9", "github.com/relock-go/relock":
			v := m.Version
			if m.Replace != nil {
				v = "local (" + m.Replace.Path + ")"
			}
			out[m.Path] = v
		}
	}
	return out
}
