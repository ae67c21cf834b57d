package schedule

import (
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/judge"
)

func deadlockPlan() *Plan { return Generate(1, KindDeadlock, Default) }

// waitCall is a CallDeadlockWait of proc from ms to ms+waited with outcome.
func waitCall(proc string, ms, waited int, outcome string) judge.Event {
	return ev(proc, CallDeadlockWait, 0, ms, judge.FormatCall(atMs(ms+waited), outcome))
}

// A wait for a second resource that reached DeadlockWait is a deadlock not
// broken; victims are counted; every process must be done once the run
// ended.
func TestCheckDeadlockWaits(t *testing.T) {
	plan := deadlockPlan()
	done := func(events ...judge.Event) []judge.Event {
		for _, p := range plan.Procs {
			events = append(events, ev(p.ID, judge.KindDone, 0, 30000, ""))
		}
		return events
	}
	bound := int(DeadlockWait.Milliseconds())
	v := Check(plan, NewHistory(plan, done(waitCall("p1", 0, bound, WaitBound+" relock: lock not obtained")), atMs(40000)), nil, nil, nil, t0)
	if !strings.Contains(v.Broken(), RuleUnbroken) {
		t.Fatalf("a wait at its bound: want %q, got %q", RuleUnbroken, v.Broken())
	}
	events := done(waitCall("p1", 0, 1000, WaitVictim+" relock: deadlock"), waitCall("p2", 0, 1200, WaitGranted))
	v = Check(plan, NewHistory(plan, events, atMs(40000)), nil, nil, nil, t0)
	v.CheckFinished(NewHistory(plan, events, atMs(40000)))
	if v.Failed() || v.Deadlocks != 1 || v.MaxBreak.Milliseconds() != 1000 {
		t.Fatalf("a broken deadlock: want a pass with one victim after 1 s, got %q, %d, %v", v.Broken(), v.Deadlocks, v.MaxBreak)
	}
	unfinished := events[:len(events)-1] // the last process never said done
	v = Check(plan, NewHistory(plan, unfinished, atMs(40000)), nil, nil, nil, t0)
	v.CheckFinished(NewHistory(plan, unfinished, atMs(40000)))
	if !strings.Contains(v.Broken(), RuleUnbroken) {
		t.Fatalf("a process not done: want %q, got %q", RuleUnbroken, v.Broken())
	}
}

// An overlap on an exclusive resource of two deadlock holds breaks the
// rules; on S alone (two permits) it does not.
func TestCheckDeadlockOverlaps(t *testing.T) {
	plan := deadlockPlan()
	for _, tc := range []struct {
		a, b string
		fail bool
	}{{"A", "A,D", true}, {"D", "A", false}} {
		events := []judge.Event{
			ev("p1", judge.KindEnter, 0, 0, tc.a), ev("p2", judge.KindEnter, 0, 50, tc.b),
			ev("p1", judge.KindExit, 0, 100, ""), ev("p2", judge.KindExit, 0, 150, ""),
		}
		v := Check(plan, NewHistory(plan, events, atMs(200)), nil, nil, nil, t0)
		if v.Failed() != tc.fail {
			t.Fatalf("%s then %s: failed %v, want %v (%s)", tc.a, tc.b, v.Failed(), tc.fail, v.Broken())
		}
	}
	if got := Exclusive([]string{ResS, ResA}); len(got) != 1 || got[0] != ResA {
		t.Fatalf("Exclusive(S, A) = %v, want [A]", got)
	}
}
