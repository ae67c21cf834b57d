package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

var t0 = time.Unix(1000, 0)

func atMs(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ev(proc, kind string, tok int64, ms int, detail string) judge.Event {
	return judge.Event{Proc: proc, Kind: kind, Token: tok, At: atMs(ms), Detail: detail}
}

func lockPlan() *Plan { return Generate(1, KindLock, Default) }

// A stale grant: p2 enters with a smaller token while p1 is inside.
func TestCheckFindsAnUnorderedOverlap(t *testing.T) {
	events := []judge.Event{
		ev("p1", judge.KindEnter, 10, 0, ""), ev("p2", judge.KindEnter, 5, 50, ""),
		ev("p1", judge.KindExit, 10, 100, ""), ev("p2", judge.KindExit, 5, 150, ""),
	}
	v := Check(lockPlan(), NewHistory(lockPlan(), events, atMs(200)), nil, nil, nil, t0)
	if !strings.Contains(v.Broken(), RuleUnordered) || !strings.Contains(v.Broken(), RuleToken) {
		t.Fatalf("want %q and %q, got %q", RuleUnordered, RuleToken, v.Broken())
	}
}

// The same overlap with the tokens in order and the loser told passes.
func TestCheckAllowsAnOrderedToldOverlap(t *testing.T) {
	events := []judge.Event{
		ev("p1", judge.KindEnter, 5, 0, ""), ev("p2", judge.KindEnter, 10, 50, ""),
		ev("p1", judge.KindLost, 5, 100, "relock: lock lost"), ev("p2", judge.KindExit, 10, 150, ""),
	}
	v := Check(lockPlan(), NewHistory(lockPlan(), events, atMs(200)), nil, nil, nil, t0)
	if v.Failed() {
		t.Fatalf("want a pass, got %v", v.Problems)
	}
}

// A grant whose message reaches its waiter late, taken away (ForceUnlock)
// after it was granted and before the next holder's grant: the late waiter
// enters while the next holder holds, with the smaller token, and learns at
// its Unlock that the hold was gone. That passes only with the take-away
// reported between its grant (its token, the server's clock) and its entry,
// and the late holder told (fault schedule fair/1130013).
func TestCheckAllowsAHoldTakenAwayBeforeItsEntry(t *testing.T) {
	micros := func(ms int) int64 { return atMs(ms).UnixMicro() }
	late, next := micros(100), micros(140) // the grants: late's first
	events := func(lateTold bool) []judge.Event {
		out := []judge.Event{
			ev("p2", judge.KindEnter, next, 150, ""),
			ev("p4", judge.KindEnter, late, 500, ""),
			ev("p2", judge.KindExit, next, 600, ""),
			ev("p4", judge.KindExit, late, 700, ""),
		}
		if lateTold {
			return append(out, ev("p4", judge.KindUnlockErr, late, 701, "relock: lock lost: the hold was gone when Unlock ran"))
		}
		return out
	}
	check := func(lateTold bool, forces ...int) *Verdict {
		var taken []time.Time
		for _, ms := range forces {
			taken = append(taken, atMs(ms))
		}
		evs := events(lateTold)
		return Check(lockPlan(), NewHistory(lockPlan(), evs, atMs(800)), nil, nil, taken, t0)
	}
	if v := check(true, 145); v.Failed() {
		t.Fatalf("taken away between the grants: want a pass, got %v", v.Problems)
	}
	for name, v := range map[string]*Verdict{
		"no take-away":                check(true),
		"taken away before its grant": check(true, 90),
		"taken away after its entry":  check(true, 510),
		"the late holder not told":    check(false, 145),
	} {
		if !strings.Contains(v.Broken(), RuleUnordered) || !strings.Contains(v.Broken(), RuleToken) {
			t.Errorf("%s: want %q and %q, got %q", name, RuleUnordered, RuleToken, v.Broken())
		}
	}
}

// A waiter asleep while the lock is free past Bound fails; the same wait
// with the lock held passes, and so does a free stretch during which the
// test had the waiter paused.
func TestCheckOversleep(t *testing.T) {
	span := int((Bound + time.Second) / time.Millisecond)
	events := []judge.Event{ev("p1", judge.KindWait, 0, 0, ""), ev("p1", judge.KindEnter, 1, span, "")}
	samples := func(held bool) []Sample {
		var out []Sample
		for ms := 0; ms <= span; ms += 20 {
			out = append(out, Sample{At: atMs(ms), Held: map[string]bool{ResA: held}, Known: true})
		}
		return out
	}
	h := NewHistory(lockPlan(), events, atMs(span))
	if v := Check(lockPlan(), h, samples(false), nil, nil, t0); !strings.Contains(v.Broken(), RuleOversleep) {
		t.Fatalf("free lock: want %q, got %q", RuleOversleep, v.Broken())
	}
	if v := Check(lockPlan(), h, samples(true), nil, nil, t0); strings.Contains(v.Broken(), RuleOversleep) {
		t.Fatalf("held lock: got %q", v.Broken())
	}
	paused := []Span{{Proc: "p1", Start: atMs(0), End: atMs(span - 1000)}}
	if v := Check(lockPlan(), h, samples(false), paused, nil, t0); strings.Contains(v.Broken(), RuleOversleep) {
		t.Fatalf("paused waiter: got %q", v.Broken())
	}
}

// quietLockPlan is lockPlan without a fault.
func quietLockPlan() *Plan {
	p := lockPlan()
	p.Faults = nil
	for i := range p.Procs {
		p.Procs[i].Conn, p.Procs[i].CloseAt, p.Procs[i].ForceAt = nil, 0, 0
	}
	return p
}

// A waiter asleep for longer than QuietBound (but below Bound) while the
// lock is free and no fault is near fails; it passes when the free stretch
// is shorter, or when a fault on its own connections (not another
// process's) may have slowed it.
func TestCheckQuietOversleep(t *testing.T) {
	const span = 2000 // ms: above QuietBound, below Bound
	events := []judge.Event{ev("p1", judge.KindWait, 0, 0, ""), ev("p1", judge.KindEnter, 1, span, "")}
	samples := func(freeFrom int) []Sample {
		var out []Sample
		for ms := 0; ms <= span; ms += 20 {
			out = append(out, Sample{At: atMs(ms), Held: map[string]bool{ResA: ms < freeFrom}, Known: true})
		}
		return out
	}
	check := func(plan *Plan, freeFrom int) *Verdict {
		return Check(plan, NewHistory(plan, events, atMs(span)), samples(freeFrom), nil, nil, t0)
	}
	v := check(quietLockPlan(), 0)
	if !strings.Contains(v.Broken(), RuleOversleepQuiet) || strings.Contains(v.Broken(), RuleOversleep+":") {
		t.Fatalf("free for %d ms, no fault: want %q alone, got %q", span, RuleOversleepQuiet, v.Broken())
	}
	if v := check(quietLockPlan(), span-800); v.Failed() {
		t.Fatalf("free for 800 ms: want a pass, got %v", v.Problems)
	}
	slowed := func(proc string) *Plan {
		p := quietLockPlan()
		p.Proc(proc).Conn = []ConnFault{{At: 0, Conn: "subscriber", Op: OpDelay, Delay: 100 * time.Millisecond, For: time.Second}}
		return p
	}
	if v := check(slowed("p1"), 0); v.Failed() {
		t.Fatalf("the waiter's subscriber slowed: want a pass, got %v", v.Problems)
	}
	if v := check(slowed("p2"), 0); !strings.Contains(v.Broken(), RuleOversleepQuiet) {
		t.Fatalf("another process slowed: want %q, got %q", RuleOversleepQuiet, v.Broken())
	}
}
