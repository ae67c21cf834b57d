package relock_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/judge"
	"github.com/relock-go/relock/internal/redistest"
)

// The multi-process safety run: several holder processes
// (internal/holderproc -judge), each with its own relock Client and its own
// connection to Redis through a proxy, contend for one lock and report every
// enter, exit and lost hold with its fencing token to a judge; faults are
// injected while a process is inside. The verdict (internal/judge):
//
//   - two holds of different processes overlap only when the later one has
//     the strictly larger token AND the earlier one was told (its context
//     ended with ErrLockLost) — a holder SIGSTOPped past its lease is the one
//     case the library cannot prevent: it must be told when it resumes, and
//     the tokens must order it;
//   - tokens strictly increase in enter order, overlapping or not;
//   - every process entered at least once, and the lock was entered again
//     after every fault;
//   - after the run, Redis holds no key without a TTL.
//
// go test runs a CI-sized version; -safety.long runs the long one and prints
// the table that RELIABILITY.md shows.
var safetyLong = flag.Bool("safety.long", false, "TestSafety: run the long multi-process safety run and print its markdown table")

type safetyConfig struct {
	procs  int           // holder processes per run
	faults int           // faults injected per run
	lease  time.Duration // watchdog lease of every holder
}

var (
	safetyCI      = safetyConfig{procs: 3, faults: 2, lease: time.Second}
	safetyLongCfg = safetyConfig{procs: 5, faults: 10, lease: 2 * time.Second}
)

// Faults injected while a process is inside its critical section.
const (
	faultRestart = "restart"     // Redis killed and restarted empty (no RDB, no AOF)
	faultPause   = "redis-pause" // Redis SIGSTOPped for a lease + 500 ms
	faultStop    = "holder-stop" // the holder inside SIGSTOPped for 2 leases
	faultCut     = "cut"         // every client connection closed (each holder's proxy)
)

type safetyScenario struct {
	fault string
	hold  time.Duration
}

func (s safetyScenario) name() string { return fmt.Sprintf("%s-%v", s.fault, s.hold) }

var safetyScenarios = func() []safetyScenario {
	var out []safetyScenario
	for _, f := range []string{faultRestart, faultPause, faultStop, faultCut} {
		for _, h := range []time.Duration{time.Second, 5 * time.Millisecond} {
			out = append(out, safetyScenario{f, h})
		}
	}
	return out
}()

// safetyKinds are the lock types of the run: test name, holderproc -kind.
var safetyKinds = [][2]string{{"Lock", "lock"}, {"FairLock", "fair"}, {"WriteLock", "write"}}

func TestSafety(t *testing.T) {
	cfg := safetyCI
	if *safetyLong {
		cfg = safetyLongCfg
	}
	redistest.Binary(t, "redis-server")
	bin := filepath.Join(t.TempDir(), "holderproc")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/holderproc").CombinedOutput()
	require.NoError(t, err, "%s", out)

	var mu sync.Mutex
	var rows []judge.Row
	t.Cleanup(func() { // after every scenario, parallel ones included
		mu.Lock()
		defer mu.Unlock()
		slices.SortStableFunc(rows, func(a, b judge.Row) int {
			return safetyOrder(a) - safetyOrder(b)
		})
		table := judge.Markdown(rows)
		if *safetyLong {
			fmt.Printf("\nSafety run: %d holder processes per run, %d faults per run, watchdog lease %v\n\n%s\n", cfg.procs, cfg.faults, cfg.lease, table)
		} else {
			t.Logf("%d processes, %d faults per run, lease %v\n%s", cfg.procs, cfg.faults, cfg.lease, table)
		}
	})

	for _, sc := range safetyScenarios {
		t.Run(sc.name(), func(t *testing.T) {
			t.Parallel()
			// The three kinds run at once, each on its own redis-server: set
			// up here (t.Fatal is the test goroutine's), run in goroutines
			// that only return their verdict, reported in a subtest per kind
			// (-run selects scenarios; a scenario always runs every kind).
			runs := make([]*safetyRun, len(safetyKinds))
			for i, k := range safetyKinds {
				runs[i] = newSafetyRun(t, bin, cfg, sc, k[1])
			}
			verdicts := make([]*judge.Verdict, len(runs))
			var wg sync.WaitGroup
			for i, r := range runs {
				wg.Add(1)
				go func() { defer wg.Done(); verdicts[i] = r.run() }()
			}
			wg.Wait()
			for i, k := range safetyKinds {
				v := verdicts[i]
				mu.Lock()
				rows = append(rows, judge.Row{Scenario: sc.name(), Kind: k[0], V: v})
				mu.Unlock()
				t.Run(k[0], func(t *testing.T) {
					t.Log(v.Summary())
					if v.Failed() {
						t.Errorf("%s: broke %s\n%s", sc.name(), v.Broken(), safetyProblems(v))
					}
				})
			}
		})
	}
}

func safetyOrder(r judge.Row) int {
	i := slices.IndexFunc(safetyScenarios, func(s safetyScenario) bool { return s.name() == r.Scenario })
	k := slices.IndexFunc(safetyKinds, func(k [2]string) bool { return k[0] == r.Kind })
	return i*len(safetyKinds) + k
}

// safetyProblems lists the broken rules, the first few of each sort in
// full.
func safetyProblems(v *judge.Verdict) string {
	const perSort = 3
	seen := make(map[string]int)
	var b strings.Builder
	for _, p := range v.Problems {
		sort := strings.Fields(p)[0]
		if strings.HasPrefix(p, "overlap") || strings.HasPrefix(p, "token went") {
			sort = strings.Join(strings.Fields(p)[:2], " ")
		}
		seen[sort]++
		if seen[sort] <= perSort {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	}
	for _, sort := range slices.Sorted(maps.Keys(seen)) {
		if n := seen[sort]; n > perSort {
			fmt.Fprintf(&b, "  (%d more like %q)\n", n-perSort, sort)
		}
	}
	return b.String()
}

// safetyRun is one scenario for one lock kind: a redis-server, a proxy per
// holder process, the judge, the processes.
type safetyRun struct {
	bin     string
	cfg     safetyConfig
	sc      safetyScenario
	kind    string
	srv     *redistest.Server
	rdb     *redis.Client
	proxies []*redistest.Proxy
	judge   *judge.Judge
	names   []string
	procs   []*holderProc
}

type holderProc struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(s.b.String()), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func newSafetyRun(t *testing.T, bin string, cfg safetyConfig, sc safetyScenario, kind string) *safetyRun {
	t.Helper()
	// Explicitly without persistence (redistest's default too): a restart
	// loses every key.
	srv := redistest.Start(t, "--save", "", "--appendonly", "no")
	r := &safetyRun{bin: bin, cfg: cfg, sc: sc, kind: kind, srv: srv, rdb: srv.Client()}
	for i := range cfg.procs {
		r.proxies = append(r.proxies, redistest.NewProxy(t, srv.Addr()))
		r.names = append(r.names, fmt.Sprintf("p%d", i+1))
	}
	j, err := judge.Listen()
	require.NoError(t, err)
	t.Cleanup(j.Close)
	r.judge = j
	t.Cleanup(func() {
		for _, p := range r.procs {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return r
}

// run runs the scenario and returns its verdict. It is called off the test
// goroutine: whatever goes wrong becomes a problem of the verdict.
func (r *safetyRun) run() *judge.Verdict {
	var trouble []string
	troublef := func(format string, args ...any) { trouble = append(trouble, fmt.Sprintf(format, args...)) }

	for i, name := range r.names {
		p := &holderProc{exited: make(chan struct{})}
		p.cmd = exec.Command(r.bin, "-judge", r.judge.Addr(), "-id", name, "-kind", r.kind,
			"-addr", r.proxies[i].Addr(), "-name", "safety", "-lease", r.cfg.lease.String(),
			"-hold", r.sc.hold.String(), "-wait", "30s")
		p.cmd.Stderr = &p.stderr
		redistest.DieWithParent(p.cmd)
		if err := p.cmd.Start(); err != nil {
			troublef("start %s: %v", name, err)
			close(p.exited)
			continue
		}
		go func() { p.err = p.cmd.Wait(); close(p.exited) }()
		r.procs = append(r.procs, p)
	}

	const patience = 20 * time.Second
	if !r.judge.WaitFor(patience, func(s *judge.State) bool {
		hello := 0
		for _, e := range s.Events {
			if e.Kind == judge.KindHello {
				hello++
			}
		}
		return hello == len(r.procs)
	}) {
		troublef("not every process reported within %v of the start", patience)
	}
	for f := 0; f < r.cfg.faults && len(trouble) == 0; f++ {
		fault, ok := r.inject()
		if !ok {
			troublef("fault %d: no process was inside within %v", f+1, patience)
			break
		}
		r.judge.AddFault(fault)
		// Recovery: the aftermath of the fault plays out (a lease), and the
		// lock is entered twice after it, before the next one (Analyze
		// reports a fault after which nobody got in).
		time.Sleep(r.cfg.lease)
		r.judge.WaitFor(patience, func(s *judge.State) bool {
			n := 0
			for _, e := range s.Events {
				if e.Kind == judge.KindEnter && e.At.After(fault.End) {
					n++
				}
			}
			return n >= 2
		})
	}
	// Every process gets its turn before the end.
	r.judge.WaitFor(patience, func(s *judge.State) bool {
		in := make(map[string]bool)
		for _, e := range s.Events {
			if e.Kind == judge.KindEnter {
				in[e.Proc] = true
			}
		}
		return len(in) == len(r.names)
	})
	r.judge.Stop()
	for i, p := range r.procs {
		select {
		case <-p.exited:
			if p.err != nil {
				troublef("%s exited with %v; its last words:\n%s", r.names[i], p.err, p.stderr.tail(5))
			}
		case <-time.After(patience):
			troublef("%s did not end its run within %v of stop", r.names[i], patience)
		}
	}

	// A process's last lines may still be in flight to the judge when it
	// exits: wait for every process's "done" before judging.
	r.judge.WaitFor(patience, func(s *judge.State) bool {
		for _, name := range r.names {
			if !slices.ContainsFunc(s.Events, func(e judge.Event) bool { return e.Proc == name && e.Kind == judge.KindDone }) {
				return false
			}
		}
		return true
	})
	events, faults, errs := r.judge.Snapshot()
	v := judge.Analyze(events, faults, r.names)
	for _, err := range errs {
		v.AddProblem(judge.RuleRun, "protocol: %v", err)
	}
	for _, s := range trouble {
		v.AddProblem(judge.RuleRun, "%s", s)
	}
	for _, name := range r.names {
		done := slices.ContainsFunc(events, func(e judge.Event) bool { return e.Proc == name && e.Kind == judge.KindDone })
		if !done {
			v.AddProblem(judge.RuleRun, "%s never reported the end of its run", name)
		}
	}
	keys, err := r.keysWithoutTTL()
	if err != nil {
		v.AddProblem(judge.RuleRun, "scanning the keyspace: %v", err)
	}
	v.AddLeftover(keys)
	return v
}

// inject waits for a process to be inside its critical section and injects
// the scenario's fault then, and returns what it did.
func (r *safetyRun) inject() (judge.Fault, bool) {
	const patience = 20 * time.Second
	for range 50 {
		var holder string
		var entered time.Time
		if !r.judge.WaitFor(patience, func(s *judge.State) bool {
			for p, e := range s.Inside {
				holder, entered = p, e.At
				return true
			}
			return false
		}) {
			return judge.Fault{}, false
		}
		// Somewhere inside the hold, not at its edges.
		time.Sleep(time.Until(entered.Add(r.sc.hold/5 + rand.N(r.sc.hold*3/5))))

		f := judge.Fault{Kind: r.sc.fault, Target: "redis", Start: time.Now()}
		switch r.sc.fault {
		case faultRestart:
			if err := r.srv.RestartErr(); err != nil {
				f.Target = "redis (restart failed: " + err.Error() + ")"
			}
		case faultPause:
			// Past the lease, short of go-redis's 3 s read timeout.
			r.srv.Pause()
			time.Sleep(r.cfg.lease + 500*time.Millisecond)
			r.srv.Resume()
		case faultCut:
			f.Target = "all"
			for _, p := range r.proxies {
				p.Cut()
			}
		case faultStop:
			i := slices.Index(r.names, holder)
			p := r.procs[i].cmd.Process
			_ = p.Signal(syscall.SIGSTOP)
			f.Start = time.Now()
			// A line written just before the stop may still be on its way.
			time.Sleep(20 * time.Millisecond)
			if e, ok := r.judge.Inside()[holder]; !ok || !e.At.Equal(entered) {
				_ = p.Signal(syscall.SIGCONT) // it had left: not a stop during a hold
				continue
			}
			f.Target = holder
			time.Sleep(2 * r.cfg.lease)
			_ = p.Signal(syscall.SIGCONT)
		}
		f.End = time.Now()
		return f, true
	}
	return judge.Fault{}, false
}

// keysWithoutTTL scans the keyspace for keys that would stay forever.
func (r *safetyRun) keysWithoutTTL() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	iter := r.rdb.Scan(ctx, 0, "*", 100).Iterator()
	for iter.Next(ctx) {
		ttl, err := r.rdb.PTTL(ctx, iter.Val()).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return out, err
		}
		if ttl == -1 {
			out = append(out, iter.Val())
		}
	}
	return out, iter.Err()
}
