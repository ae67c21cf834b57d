package relock_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/judge"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/schedule"
)

// scheduleRun is one generated plan played out: its redis-servers, the
// judge, one holderproc per process of the plan, and the sampler that
// watches which resources Redis says are held.
type scheduleRun struct {
	t       *testing.T
	bin     string
	plan    *schedule.Plan
	size    schedule.Size
	servers []*redistest.Server
	cluster *redistest.Cluster // a Cluster plan's, instead of servers
	inspect []*relock.Client   // one per server (one for a Cluster), the test's own
	judge   *judge.Judge
	procs   map[string]*holderProc
	start   time.Time
	// stopEarly ends the run at its first broken rule.
	stopEarly bool

	restoring  atomic.Bool // samples are unknown while a snapshot is restored
	resharding sync.Mutex  // one slot move at a time (concurrent MIGRATEs block each other)
	mu         sync.Mutex
	samples    []schedule.Sample
	pauses     []schedule.Span
	forced     []time.Time // the test's ForceUnlocks after a restore
	trouble    []string
}

// scheduleDeadline bounds a run: past it the judge stops the processes. A
// deadlock plan's may wait out faults that keep detection from checking
// (schedule.DeadlockRun).
func scheduleDeadline(plan *schedule.Plan, size schedule.Size) time.Duration {
	if plan.Kind == schedule.KindDeadlock {
		return schedule.DeadlockRun
	}
	return 3*size.Horizon + 2*schedule.Bound
}

func newScheduleRun(t *testing.T, bin string, plan *schedule.Plan, size schedule.Size) *scheduleRun {
	r := &scheduleRun{t: t, bin: bin, plan: plan, size: size, procs: map[string]*holderProc{}}
	if plan.Cluster {
		r.cluster = redistest.StartCluster(t, 3, 0)
		c := relock.New(r.cluster.Client())
		t.Cleanup(func() { _ = c.Close() })
		r.inspect = append(r.inspect, c)
	}
	for range plan.Servers() {
		srv := redistest.Start(t)
		c := relock.New(srv.Client())
		t.Cleanup(func() { _ = c.Close() })
		r.servers, r.inspect = append(r.servers, srv), append(r.inspect, c)
	}
	j, err := judge.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	r.judge = j
	t.Cleanup(r.killAll)
	return r
}

func (r *scheduleRun) troublef(format string, args ...any) {
	r.mu.Lock()
	r.trouble = append(r.trouble, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// run plays the plan and returns its verdict.
func (r *scheduleRun) run() *schedule.Verdict {
	if !r.startProcs() {
		return r.verdict()
	}
	r.start = time.Now()
	ctx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() { r.sample(ctx); close(sampled) }()
	var faults sync.WaitGroup
	for _, f := range r.plan.Faults {
		faults.Go(func() { r.inject(f) })
	}
	r.waitEnd(scheduleDeadline(r.plan, r.size))
	faults.Wait()
	// Every process has finished (or the run's time is up): what is still
	// held in Redis must be freed within the bound, while the processes
	// still run (their Clients retry failed releases in the background).
	r.waitFree(schedule.Bound)
	r.judge.Stop()
	r.waitExit(10 * time.Second)
	stopSampling()
	<-sampled
	v := r.verdict()
	r.checkLeftover(v)
	events, _, _ := r.judge.Snapshot()
	v.CheckFinished(schedule.NewHistory(r.plan, events, time.Now()))
	return v
}

// waitEnd waits until every process has finished, the deadline has passed,
// or — with stopEarly — the run has already broken a rule (a CI run need not
// wait out a waiter stranded for a 30 s lease to fail).
func (r *scheduleRun) waitEnd(deadline time.Duration) {
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		if r.judge.WaitFor(500*time.Millisecond, func(s *judge.State) bool { return r.everyProc(s.Done) }) {
			return
		}
		if r.stopEarly && r.verdict().Failed() {
			return
		}
	}
}

func (r *scheduleRun) startProcs() bool {
	addrs := make([]string, len(r.servers))
	for i, s := range r.servers {
		addrs[i] = s.Addr()
	}
	if r.cluster != nil {
		addrs = r.cluster.Addrs()
	}
	planJSON := r.plan.Encode()
	for _, pr := range r.plan.Procs {
		p := &holderProc{exited: make(chan struct{})}
		p.cmd = exec.Command(r.bin, "-plan", planJSON, "-id", pr.ID, "-judge", r.judge.Addr(),
			"-addr", strings.Join(addrs, ","))
		p.cmd.Stderr = &p.stderr
		redistest.DieWithParent(p.cmd)
		if err := p.cmd.Start(); err != nil {
			r.troublef("start %s: %v", pr.ID, err)
			return false
		}
		go func() { p.err = p.cmd.Wait(); close(p.exited) }()
		r.procs[pr.ID] = p
	}
	const patience = 20 * time.Second
	if !r.judge.WaitFor(patience, func(s *judge.State) bool {
		hello := map[string]bool{}
		for _, e := range s.Events {
			if e.Kind == judge.KindHello {
				hello[e.Proc] = true
			}
		}
		return r.everyProc(hello)
	}) {
		r.troublef("not every process reported within %v of its start", patience)
		return false
	}
	return true
}

// everyProc reports whether every process of the plan is in set (a crowd's
// waiters report under ids of their own, which do not count).
func (r *scheduleRun) everyProc(set map[string]bool) bool {
	for _, pr := range r.plan.Procs {
		if !set[pr.ID] {
			return false
		}
	}
	return true
}

func (r *scheduleRun) killAll() {
	for _, p := range r.procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (r *scheduleRun) waitExit(patience time.Duration) {
	deadline := time.After(patience)
	for id, p := range r.procs {
		select {
		case <-p.exited:
			if p.err != nil {
				r.troublef("%s exited: %v: %s", id, p.err, p.stderr.tail(5))
			}
		case <-deadline:
			r.troublef("%s did not exit within %v of the stop", id, patience)
			return
		}
	}
}

// verdict judges what the run recorded.
func (r *scheduleRun) verdict() *schedule.Verdict {
	events, _, errs := r.judge.Snapshot()
	h := schedule.NewHistory(r.plan, events, time.Now())
	r.mu.Lock()
	defer r.mu.Unlock()
	v := schedule.Check(r.plan, h, r.samples, r.pauses, r.forced, r.start)
	for _, err := range errs {
		v.AddProblem(schedule.RuleRun, "judge protocol: %v", err)
	}
	for _, s := range r.trouble {
		v.AddProblem(schedule.RuleRun, "%s", s)
	}
	return v
}
