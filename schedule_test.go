package relock_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/schedule"
)

// The randomized fault-schedule tester: each run draws a plan
// from a seed (internal/schedule.Generate) — four OS processes
// (internal/holderproc -plan) with their own Clients on real redis-servers,
// mixed short and watchdog leases, faults on one connection kind of one
// process at a time (a slow subscriber or slow replies, a link cut a few
// requests ahead, every link of a kind cut), a process paused, a snapshot
// restored, Close and ForceUnlock at a random point — plays it, and judges
// it (schedule.Check): no overlap the tokens do not order and no loser left
// untold, tokens that increase, no waiter asleep past schedule.Bound while
// its lock is free, nothing held in Redis by nobody past the bound, nothing
// left after the run.
//
// -schedule.kind=sema plays a Semaphore: four processes holding 1 to 3
// permits at a time, SetPermits at random points, in a third of the plans a
// crowd of 100+ waiters over several Clients; its checks (schedule's
// checkCapacity, checkPermitsInRedis) hold the permits of the holds its
// processes believe live to the capacity Redis recorded, and Redis's count
// of used permits to theirs. -schedule.kind=latch plays rounds of a
// CountDownLatch: TrySetCount, CountDowns and Waits from every process;
// no Wait returns nil without its CountDowns, none sleeps past the bound
// once its latch is gone (checkLatch). -schedule.kind=deadlock has four
// processes take two of Locks A and D and a Semaphore S of two permits in
// drawn orders, keeping the first while they wait for the second: no
// overlap on A or D, no wait reaching schedule.DeadlockWait (a deadlock not
// broken), every process done within schedule.DeadlockRun.
// -schedule.kind=reshard plays a Lock's, FairLock's, RWLock's or (a third
// of the plans) Semaphore's plan on a three-master Cluster while the test
// moves A's slot between masters two to four times (each split for 0 to
// 500 ms: ASK and TRYAGAIN, then MOVED), with that kind's checks.
//
// go test runs the CI seeds; -schedule.long runs many fresh ones and prints
// the table RELIABILITY.md shows; -schedule.seed and -schedule.kind replay
// one.
var (
	scheduleLong   = flag.Bool("schedule.long", false, "TestFaultSchedule: run -schedule.runs fresh seeds and print the table")
	scheduleSeed   = flag.Int64("schedule.seed", 0, "TestFaultSchedule: replay this seed (with -schedule.kind); with -schedule.long: the first seed")
	scheduleKind   = flag.String("schedule.kind", "", "TestFaultSchedule: lock kind of -schedule.seed: lock, fair, rw, multi, sema, latch, deadlock or reshard (default: every kind)")
	scheduleRuns   = flag.Int("schedule.runs", 40, "TestFaultSchedule: runs of -schedule.long")
	scheduleClient = flag.String("schedule.client", "", "TestFaultSchedule: give every process this go-redis setup (default, ctxtimeout or timeouts) instead of the plan's draw")
	scheduleDump   = flag.Bool("schedule.dump", false, "TestFaultSchedule: on a failure, print each process's log and every key left in Redis")
)

// scheduleCISeeds are the seeds of the CI run, each found by a fresh-seed
// search on code without one of the fixes it guards (RELIABILITY.md):
// lock/1006 is aimed at a stale grant (schedule's aimAtStaleGrant; bug 1:
// with the grant check's trusted() reverted, the slow waiter enters with a
// token below the holder's — caught in 4 of 4 runs); rw/102 strands a
// writer while the lock is free; multi/405 leaves B held by nobody after a
// restored snapshot and ForceUnlock (bug 10); fair/101 passed; multi/703
// cuts a MultiLock's rollback (bug 4: with the background free reverted, A
// is left held by nobody — caught in 2 of 3 runs, the cut depends on B
// being busy at a first attempt). sema/7 restores a snapshot, pauses a
// process, closes a Client and sets the capacity; sema/16 adds a
// crowd of 100+ waiters over four Clients to a restore and a pause; latch/2
// restores a snapshot over a round's TrySetCount; latch/13 cuts links around
// the CountDowns (all passed; RELIABILITY.md); sema/19 (a process's own
// SetPermits below its waiting request stranded it for 22 s) and latch/14
// (a restore lost a CountDown, the setter's Delete left its waiters
// waiting 18-22 s) failed before the Semaphore and latch fixes. lock/302 (bugs 1 and 2 on the code before
// the fixes) was dropped when the stale-grant aim changed its plan, to keep
// the run near a minute; its new plan passes on the fixed code.
// deadlock/490100 (four processes taking two of Locks A, D and a
// Semaphore S of two permits) left a deadlock through both holders of S
// unbroken for 20 s on a search that required every holder to lead back.
// reshard/2002 (a Lock plan, four moves of A's slot) left A held by nobody
// for 24 s when a release's retry stopped at ASK, TRYAGAIN or MOVED (2 runs
// of 2 with those refusals not retried).
var scheduleCISeeds = []scheduleCase{
	{schedule.KindLock, 1006},
	{schedule.KindFair, 101},
	{schedule.KindRW, 102},
	{schedule.KindMulti, 405},
	{schedule.KindMulti, 703},
	{schedule.KindSema, 7},
	{schedule.KindSema, 16},
	{schedule.KindLatch, 2},
	{schedule.KindLatch, 13},
	{schedule.KindSema, 19},
	{schedule.KindLatch, 14},
	{schedule.KindDeadlock, 490100},
	{schedule.KindReshard, 2002},
}

type scheduleCase struct {
	kind string
	seed int64
}

func TestFaultSchedule(t *testing.T) {
	cases, size := scheduleCases()
	bin := buildHolder(t)
	var rows []string
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/seed=%d", c.kind, c.seed), func(t *testing.T) {
			plan := schedule.Generate(c.seed, c.kind, size)
			setClients(plan, *scheduleClient)
			began := time.Now()
			run := newScheduleRun(t, bin, plan, size)
			run.stopEarly = !*scheduleLong
			v := run.run()
			rows = append(rows, scheduleRow(v, time.Since(began)))
			if plan.BaseKind() == schedule.KindSema {
				t.Logf("longest queue seen: %d waiters", v.MaxQueue)
			}
			if c.kind == schedule.KindDeadlock {
				t.Logf("deadlocks broken: %d, longest victim wait %v", v.Deadlocks, v.MaxBreak)
			}
			if v.Failed() && *scheduleDump {
				run.dump(t)
			}
			if v.Failed() {
				t.Errorf("fault schedule %s failed: %s\nreplay: %s\n%s\n%s", c.kind, v.Broken(), replayCommand(c),
					strings.Join(v.Problems, "\n"), plan.Describe())
			}
		})
	}
	if *scheduleLong {
		t.Logf("\n%s", scheduleTable(rows))
	}
}

func scheduleCases() ([]scheduleCase, schedule.Size) {
	kinds := schedule.Kinds
	if *scheduleKind != "" {
		kinds = []string{*scheduleKind}
	}
	switch {
	case *scheduleLong:
		var out []scheduleCase
		first := *scheduleSeed
		if first == 0 {
			first = time.Now().UnixNano() % 1_000_000
		}
		for i := range *scheduleRuns {
			out = append(out, scheduleCase{kinds[i%len(kinds)], first + int64(i)})
		}
		return out, schedule.Default
	case *scheduleSeed != 0:
		var out []scheduleCase
		for _, k := range kinds {
			out = append(out, scheduleCase{k, *scheduleSeed})
		}
		return out, schedule.Default
	}
	if *scheduleKind != "" {
		var out []scheduleCase
		for _, c := range scheduleCISeeds {
			if c.kind == *scheduleKind {
				out = append(out, c)
			}
		}
		return out, schedule.Default
	}
	return scheduleCISeeds, schedule.Default
}

func replayCommand(c scheduleCase) string {
	return fmt.Sprintf("go test -race -count=1 -run 'TestFaultSchedule' . -args -schedule.seed=%d -schedule.kind=%s", c.seed, c.kind)
}

func scheduleRow(v *schedule.Verdict, took time.Duration) string {
	verdict := "pass"
	if v.Failed() {
		verdict = "**FAIL**: " + v.Broken()
	}
	return fmt.Sprintf("| %d | %s | %d | %d | %d | %d | %s | %s | %s | %s |", v.Plan.Seed, v.Plan.Kind, v.Plan.FaultCount(),
		v.Acquisitions, v.Overlaps, v.Told, msOf(v.MaxOversleep)+" / "+msOf(v.MaxQuietOversleep), msOf(v.MaxOrphan), msOf(took), verdict)
}

func scheduleTable(rows []string) string {
	return "| seed | kind | faults | acquisitions | overlaps (ordered, loser told) | losses signalled | longest sleep while free (any / no fault near) | longest held by nobody | run | verdict |\n" +
		"|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n" + strings.Join(rows, "\n")
}

func msOf(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// setClients gives every process of plan the go-redis setup named (""
// keeps the plan's draw; "default" is go-redis's defaults).
func setClients(plan *schedule.Plan, setup string) {
	if setup == "" {
		return
	}
	if setup == "default" {
		setup = schedule.ClientDefault
	}
	for i := range plan.Procs {
		plan.Procs[i].Client = setup
	}
}

// dump logs each process's log and every key left on the run's servers,
// with its fields and PTTL: who holds what a failed run left behind.
func (r *scheduleRun) dump(t *testing.T) {
	for id, p := range r.procs {
		t.Logf("%s log:\n%s", id, p.stderr.tail(60))
	}
	ctx := context.Background()
	for i, srv := range r.keyServers() {
		rc := srv.Client()
		keys, _ := rc.Keys(ctx, "*").Result()
		for _, k := range keys {
			t.Logf("server %d: %s (PTTL %v, %s): %q", i, k, rc.PTTL(ctx, k).Val(), rc.Type(ctx, k).Val(), rc.HGetAll(ctx, k).Val())
		}
	}
}
