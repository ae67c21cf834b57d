// Command bench runs relock and its peers through the same scenarios on one
// Redis and prints a markdown table of ratios against the floor.
//
//	go run ./bench                    # starts its own redis-server; ~6 minutes
//	go run ./bench -redis host:port   # uses that Redis (writes keys under relockbench:*)
//	go run ./bench -duration 200ms -rounds 1 -svg ''   # a quick look, ~15 s
//	go run ./bench -scenarios p16,p64 -libs relock,relock-fair   # some rows only
//	go run ./bench -overshoot -trials 100   # deadline overshoot under faults; ~5 minutes
//
// Run it from the bench module's directory.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/bench"
	"github.com/relock-go/relock/internal/redistest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("redis", "", "Redis host:port to use; empty starts a redis-server on a free 127.0.0.1 port")
	duration := flag.Duration("duration", time.Second, "length of one library's run of one scenario, per round")
	rounds := flag.Int("rounds", 6, "rounds; each runs every scenario for every library, interleaved")
	clients := flag.Int("clients", 2, "clients (\"processes\") per library in the shared-Client scenarios, whose goroutines alternate between them; the headline scenarios have one per worker")
	svg := flag.String("svg", "../docs/bench.svg", "where to write the SVG chart of the headline ratios (.png also works); empty for none")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	scenarios := flag.String("scenarios", "", "comma-separated scenario IDs to run (default all: "+ids(bench.Scenarios())+")")
	libs := flag.String("libs", "", "comma-separated libraries to run (default all; the floor always runs)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	overshoot := flag.Bool("overshoot", false, "instead of the comparison, measure how late Lock returns after its deadline under faults (needs its own redis-server: no -redis)")
	trials := flag.Int("trials", 100, "-overshoot: Lock calls per fault and library")
	parallel := flag.Int("parallel", 10, "-overshoot: trials per library run at once, each on its own client")
	deadline := flag.Duration("deadline", 500*time.Millisecond, "-overshoot: the deadline of each Lock's context")
	ctxTimeout := flag.Bool("ctxtimeout", true, "set go-redis's ContextTimeoutEnabled on the go-redis client of every library that has one (all but rueidislock): go-redis then bounds each command by its context's deadline, and relock's Unlock runs inline instead of on a goroutine of its own; false: go-redis's default")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Piped into head, a write to a closed stdout must fail, not kill the
	// process before it stops its redis-server.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if *overshoot {
		if *addr != "" {
			return fmt.Errorf("-overshoot pauses the redis-server it starts: drop -redis")
		}
		return runOvershoot(ctx, bench.OvershootConfig{Trials: *trials, Parallel: *parallel, Deadline: *deadline,
			Delay: time.Second, Libs: bench.OvershootLibraries(), Progress: progress(*quiet)})
	}
	cfg := bench.Config{Addr: *addr, Duration: *duration, Rounds: *rounds, Clients: *clients, Progress: os.Stderr, ContextTimeout: *ctxTimeout}
	if *quiet {
		cfg.Progress = nil
	}
	return runComparison(ctx, cfg, *scenarios, *libs, *svg)
}

// runComparison runs the scenarios and libraries named (all when empty) on
// cfg.Addr, or on a redis-server of its own when it is empty, and writes the
// report to stdout and its chart to svg (none when empty).
func runComparison(ctx context.Context, cfg bench.Config, scenarios, libs, svg string) error {
	if cfg.Addr == "" {
		srv, err := redistest.Run()
		if err != nil {
			return fmt.Errorf("%w (install it, or pass -redis host:port)", err)
		}
		defer srv.Stop()
		cfg.Addr = srv.Addr()
	}
	var err error
	if cfg.Scenarios, err = pick(bench.Scenarios(), scenarios, func(s bench.Scenario) string { return s.ID }); err != nil {
		return err
	}
	if cfg.Libraries, err = pick(bench.Libraries(), libs, func(l bench.Library) string { return l.Name }); err != nil {
		return err
	}
	if cfg.Libraries[0].Name != bench.FloorName {
		// Every ratio is against the floor.
		cfg.Libraries = append([]bench.Library{bench.Libraries()[0]}, cfg.Libraries...)
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return writeReport(rep, svg)
}

// writeReport writes rep as markdown to stdout, and its chart to svg (none
// when empty; the extension picks the format).
func writeReport(rep *bench.Report, svg string) error {
	var out bytes.Buffer
	out.WriteString("### Setup\n\n")
	rep.WriteSetup(&out)
	out.WriteString("\n### Results (value, and in parentheses library ÷ floor)\n\n")
	rep.WriteTable(&out)
	out.WriteString("\n### Targets\n\n")
	rep.WriteTargets(&out)
	if _, err := os.Stdout.Write(out.Bytes()); err != nil {
		return err
	}
	if svg == "" {
		return nil
	}
	var b bytes.Buffer
	format := strings.TrimPrefix(filepath.Ext(svg), ".")
	if format == "" {
		format = "svg"
	}
	if err := rep.WriteChart(&b, format); err != nil {
		return err
	}
	if err := os.WriteFile(svg, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "chart written to %s\n", svg)
	return nil
}

// runOvershoot runs the overshoot measurement on a redis-server of its own
// and prints its table.
func runOvershoot(ctx context.Context, cfg bench.OvershootConfig) error {
	// Under the faults go-redis logs every failed dial and relock warns of
	// its subscriber's loss: the table says what happened.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	redis.SetLogger(quietLogger{})
	srv, err := redistest.Run()
	if err != nil {
		return err
	}
	defer srv.Stop() // resumes it first if it is paused
	proxy, err := redistest.StartProxy(srv.Addr())
	if err != nil {
		return err
	}
	defer proxy.Close()
	refused, err := bench.RefusedAddr()
	if err != nil {
		return err
	}
	res, err := bench.RunOvershoot(ctx, cfg, bench.Faults(srv, proxy, refused, cfg.Delay))
	if err != nil {
		return err
	}
	fmt.Printf("Lock with a %v context deadline; (return time − deadline) over %d trials per fault and library, %d at a time per library:\n\n",
		cfg.Deadline, cfg.Trials, min(cfg.Parallel, cfg.Trials))
	bench.WriteOvershootTable(os.Stdout, res)
	return nil
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func progress(quiet bool) io.Writer {
	if quiet {
		return nil
	}
	return os.Stderr
}

// pick returns the items whose names are listed in csv, in their own order,
// or all of them for an empty csv.
func pick[T any](all []T, csv string, name func(T) string) ([]T, error) {
	if csv == "" {
		return all, nil
	}
	want := make(map[string]bool)
	for _, n := range strings.Split(csv, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []T
	for _, it := range all {
		if want[name(it)] {
			out = append(out, it)
			delete(want, name(it))
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown name %q", n)
	}
	return out, nil
}

func ids(scs []bench.Scenario) string {
	var out []string
	for _, s := range scs {
		out = append(out, s.ID)
	}
	return strings.Join(out, ",")
}
