package relock_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/judge"
	"github.com/relock-go/relock/internal/redistest"
)

// The Semaphore's multi-process safety run: 4 holder processes
// (internal/holderproc -kind sema) × 8 goroutines share a semaphore of 5
// permits, each acquisition taking 1 to 3, and report every enter, exit and
// lost hold (the permits as token) to a judge. Faults, one after the other,
// with work between them: every connection cut, one process SIGSTOPped past
// its lease, Redis restarted empty, one process killed (SIGKILL). Checked:
//
//   - at every instant the permits of the holds that were not lost sum to
//     at most 5 (a hold that ends with ErrLockLost — its context, or its
//     Release — is the only one allowed to overlap: the lost signal orders
//     it);
//   - every hold open across the restart (whose permits Redis forgot) was
//     told so;
//   - no waiter slept past its bound (10 s) while permits were free: no
//     acquisition failed with ErrNotObtained;
//   - every goroutine got permits, after the last fault too, and every
//     permit comes back (the killed process's within its lease), with no key
//     left without a TTL.
func TestSemaphoreSafety(t *testing.T) {
	redistest.Binary(t, "redis-server")
	bin := filepath.Join(t.TempDir(), "holderproc")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/holderproc").CombinedOutput()
	require.NoError(t, err, "%s", out)
	r := newSemaRun(t, bin)
	r.start()
	r.inject("cut", func() {
		for _, p := range r.proxies {
			p.Cut()
		}
	})
	r.inject("holder-stop", func() {
		p := r.procs[1].cmd.Process
		_ = p.Signal(syscall.SIGSTOP)
		time.Sleep(2 * semaLease)
		_ = p.Signal(syscall.SIGCONT)
	})
	r.inject("restart", func() { require.NoError(t, r.srv.RestartErr()) })
	r.inject("kill", func() {
		_ = r.procs[3].cmd.Process.Kill()
		r.killed["p4"] = time.Now()
	})
	r.finish()
}

const (
	semaProcs, semaGoroutines, semaPermits = 4, 8, 5
	semaLease                              = time.Second
	semaWait                               = 10 * time.Second
)

type semaRun struct {
	t       *testing.T
	bin     string
	srv     *redistest.Server
	proxies []*redistest.Proxy
	judge   *judge.Judge
	procs   []*holderProc
	faults  []judge.Fault
	killed  map[string]time.Time
}

func newSemaRun(t *testing.T, bin string) *semaRun {
	r := &semaRun{t: t, bin: bin, srv: redistest.Start(t, "--save", "", "--appendonly", "no"), killed: map[string]time.Time{}}
	for range semaProcs {
		r.proxies = append(r.proxies, redistest.NewProxy(t, r.srv.Addr()))
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

func (r *semaRun) start() {
	for i := range semaProcs {
		p := &holderProc{exited: make(chan struct{})}
		p.cmd = exec.Command(r.bin, "-judge", r.judge.Addr(), "-id", fmt.Sprintf("p%d", i+1), "-kind", "sema",
			"-addr", r.proxies[i].Addr(), "-name", "safety", "-lease", semaLease.String(), "-hold", "40ms",
			"-wait", semaWait.String(), "-permits", fmt.Sprint(semaPermits), "-take", "3",
			"-goroutines", fmt.Sprint(semaGoroutines))
		p.cmd.Stderr = &p.stderr
		redistest.DieWithParent(p.cmd)
		require.NoError(r.t, p.cmd.Start())
		go func() { p.err = p.cmd.Wait(); close(p.exited) }()
		r.procs = append(r.procs, p)
	}
	require.True(r.t, r.judge.WaitFor(20*time.Second, func(s *judge.State) bool {
		return count(s.Events, judge.KindHello, time.Time{}) == semaProcs*semaGoroutines
	}), "every goroutine reports")
	r.entersAfter(time.Now(), 20)
}

// count counts the events of kind after since.
func count(events []judge.Event, kind string, since time.Time) int {
	n := 0
	for _, e := range events {
		if e.Kind == kind && e.At.After(since) {
			n++
		}
	}
	return n
}

// entersAfter waits for n acquisitions after t0.
func (r *semaRun) entersAfter(t0 time.Time, n int) {
	r.t.Helper()
	require.True(r.t, r.judge.WaitFor(20*time.Second, func(s *judge.State) bool {
		return count(s.Events, judge.KindEnter, t0) >= n
	}), "permits are acquired again after %v", t0)
}

// inject runs one fault while permits are held, then lets the aftermath play
// out (a lease) and waits for work to go on.
func (r *semaRun) inject(kind string, fault func()) {
	require.True(r.t, r.judge.WaitFor(20*time.Second, func(s *judge.State) bool { return len(s.Inside) > 0 }))
	f := judge.Fault{Kind: kind, Target: "sema", Start: time.Now()}
	fault()
	f.End = time.Now()
	r.faults = append(r.faults, f)
	r.judge.AddFault(f)
	time.Sleep(semaLease)
	r.entersAfter(f.End, 20)
}

func (r *semaRun) finish() {
	t := r.t
	r.judge.Stop()
	for i, p := range r.procs {
		name := fmt.Sprintf("p%d", i+1)
		select {
		case <-p.exited:
			if _, killed := r.killed[name]; !killed {
				assert.NoError(t, p.err, "%s; its last words:\n%s", name, p.stderr.tail(5))
			}
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not end its run", name)
		}
	}
	live := semaGoroutines * (semaProcs - len(r.killed))
	assert.True(t, r.judge.WaitFor(10*time.Second, func(s *judge.State) bool {
		return count(s.Events, judge.KindDone, time.Time{}) == live
	}), "every live goroutine reports the end of its run")
	events, _, errs := r.judge.Snapshot()
	assert.Empty(t, errs)
	for _, p := range semaProblems(events, r.faults, r.killed, semaPermits) {
		t.Error(p)
	}
	holds, _ := semaHolds(events, r.killed)
	told := 0
	for _, h := range holds {
		if h.told {
			told++
		}
	}
	t.Logf("%d acquisitions, %d of them lost and told, peak %d permits held by holds not lost; faults: %d",
		len(holds), told, peakPermits(holds), len(r.faults))
	// Every permit comes back: the killed process's within its lease.
	s := relock.New(r.srv.Client()).Semaphore("safety", semaPermits)
	assert.Eventually(t, func() bool {
		n, err := s.Available(context.Background())
		return err == nil && n == semaPermits
	}, 3*semaLease, 20*time.Millisecond, "every permit comes back")
	for _, k := range allKeys(t, r.srv.Client()) {
		assert.Positive(t, pttl(t, r.srv.Client(), k), "%s must expire", k)
	}
}

// semaHold is one acquisition as its goroutine reported it.
type semaHold struct {
	proc       string
	n          int64
	start, end time.Time
	told       bool // ended with ErrLockLost: its context, or its Release
	open       bool
}

// semaHolds pairs each goroutine's enter with its end. A hold of a killed
// process ends at the kill.
func semaHolds(events []judge.Event, killed map[string]time.Time) ([]*semaHold, []string) {
	var holds []*semaHold
	var problems []string
	last := map[string]*semaHold{}
	for _, e := range events {
		h := last[e.Proc]
		switch e.Kind {
		case judge.KindEnter:
			h = &semaHold{proc: e.Proc, n: e.Token, start: e.At, open: true}
			holds = append(holds, h)
			last[e.Proc] = h
		case judge.KindExit, judge.KindLost:
			if h == nil || !h.open {
				problems = append(problems, fmt.Sprintf("%s: %s without an enter", e.Proc, e.Kind))
				continue
			}
			h.end, h.open, h.told = e.At, false, e.Kind == judge.KindLost
		case judge.KindUnlockErr:
			if h != nil && strings.Contains(e.Detail, relock.ErrLockLost.Error()) {
				h.told = true
			}
		case judge.KindLockErr:
			if strings.Contains(e.Detail, relock.ErrNotObtained.Error()) {
				problems = append(problems, fmt.Sprintf("%s waited past its bound: %s", e.Proc, e.Detail))
			}
		}
	}
	for _, h := range holds {
		if !h.open {
			continue
		}
		proc, _, _ := strings.Cut(h.proc, ".")
		if at, ok := killed[proc]; ok {
			h.end, h.open = at, false
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: a hold from %v never ended", h.proc, h.start))
	}
	return holds, problems
}

// peakPermits is the most permits that holds not lost held at once.
func peakPermits(holds []*semaHold) int64 {
	var peak int64
	for _, h := range holds {
		if h.told || h.open {
			continue
		}
		var sum int64
		for _, o := range holds {
			if !o.told && !o.open && !o.start.After(h.start) && o.end.After(h.start) {
				sum += o.n
			}
		}
		peak = max(peak, sum)
	}
	return peak
}

// semaProblems is the verdict of the run (see TestSemaphoreSafety).
func semaProblems(events []judge.Event, faults []judge.Fault, killed map[string]time.Time, permits int64) []string {
	holds, problems := semaHolds(events, killed)
	type edge struct {
		at time.Time
		d  int64
		h  *semaHold
	}
	var edges []edge
	for _, h := range holds {
		if !h.told && !h.open {
			edges = append(edges, edge{h.start, h.n, h}, edge{h.end, -h.n, h})
		}
	}
	sort.SliceStable(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].d < edges[j].d // an end before a start at the same instant
		}
		return edges[i].at.Before(edges[j].at)
	})
	var sum int64
	for _, e := range edges {
		if sum += e.d; sum > permits {
			problems = append(problems, fmt.Sprintf("%d permits held at once at %v (%s took %d)", sum, e.at, e.h.proc, e.h.n))
		}
	}
	for _, f := range faults {
		if f.Kind != "restart" {
			continue
		}
		for _, h := range holds {
			if h.start.Before(f.Start) && h.end.After(f.End.Add(semaLease)) && !h.told {
				problems = append(problems, fmt.Sprintf("%s held across the restart and was never told", h.proc))
			}
		}
	}
	entered := map[string]bool{}
	for _, h := range holds {
		entered[h.proc] = true
	}
	if len(entered) != semaProcs*semaGoroutines {
		problems = append(problems, fmt.Sprintf("%d goroutines got permits, want %d", len(entered), semaProcs*semaGoroutines))
	}
	return problems
}
