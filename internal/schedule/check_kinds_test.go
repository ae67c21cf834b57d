package schedule

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

func semaPlan() *Plan { return Generate(1, KindSema, Default) }

// semaSamples are samples every 20 ms over [0, ms] of a Semaphore with
// capacity permits and used(ms) permits used.
func semaSamples(ms, permits int, used func(int) int) []Sample {
	var out []Sample
	for at := 0; at <= ms; at += 20 {
		u := used(at)
		out = append(out, Sample{At: atMs(at), Known: true, Sema: SemaSample{Permits: permits, Used: u},
			Held: map[string]bool{ResA: u > 0 && permits-u < MaxTake}})
	}
	return out
}

// p1 holds 3 permits and p2 enters with 2 of a capacity of 4: over
// capacity, unless p1 was told it lost its permits.
func TestCheckSemaOverCapacity(t *testing.T) {
	used := func(ms int) int { return 3 }
	events := []judge.Event{
		ev("p1", judge.KindWait, 0, 0, ""), ev("p1", judge.KindEnter, 3, 10, ""),
		ev("p2", judge.KindWait, 0, 20, ""), ev("p2", judge.KindEnter, 2, 100, ""),
		ev("p1", judge.KindExit, 3, 200, ""), ev("p2", judge.KindExit, 2, 300, ""),
	}
	v := Check(semaPlan(), NewHistory(semaPlan(), events, atMs(400)), semaSamples(400, 4, used), nil, nil, t0)
	if !strings.Contains(v.Broken(), RuleOverCapacity) {
		t.Fatalf("want %q, got %q", RuleOverCapacity, v.Broken())
	}
	events[4] = ev("p1", judge.KindLost, 3, 200, "relock: lock lost: lease expired")
	v = Check(semaPlan(), NewHistory(semaPlan(), events, atMs(400)), semaSamples(400, 4, used), nil, nil, t0)
	if strings.Contains(v.Broken(), RuleOverCapacity) {
		t.Fatalf("loser told: got %q", v.Broken())
	}
	// A SetPermits(5) that served p2 shows in the first sample after its
	// enter, however late that comes.
	late := append(semaSamples(100, 4, used), Sample{At: atMs(300), Known: true, Sema: SemaSample{Permits: 5, Used: 5}, Held: map[string]bool{ResA: true}})
	v = Check(semaPlan(), NewHistory(semaPlan(), events[:4], atMs(400)), late, nil, nil, t0)
	if strings.Contains(v.Broken(), RuleOverCapacity) {
		t.Fatalf("served by SetPermits(5): got %q", v.Broken())
	}
	// The capacity Redis recorded while p2 waited was 5: it fits.
	v = Check(semaPlan(), NewHistory(semaPlan(), events[:4], atMs(400)), semaSamples(400, 5, used), nil, nil, t0)
	if strings.Contains(v.Broken(), RuleOverCapacity) {
		t.Fatalf("capacity 5: got %q", v.Broken())
	}
}

// Redis counting no permit while p1 believes it holds 2, past Bound, is a
// loss nobody told; Redis counting 2 while nobody holds, past Bound, is a
// permit held by nobody.
func TestCheckSemaPermitsInRedis(t *testing.T) {
	span := int((Bound + time.Second) / time.Millisecond)
	held := []judge.Event{ev("p1", judge.KindEnter, 2, 0, ""), ev("p1", judge.KindExit, 2, span, "")}
	h := NewHistory(semaPlan(), held, atMs(span))
	if v := Check(semaPlan(), h, semaSamples(span, 4, func(int) int { return 0 }), nil, nil, t0); !strings.Contains(v.Broken(), RuleUnsignalled) {
		t.Fatalf("want %q, got %q", RuleUnsignalled, v.Broken())
	}
	if v := Check(semaPlan(), h, semaSamples(span, 4, func(int) int { return 2 }), nil, nil, t0); v.Failed() {
		t.Fatalf("held as believed: got %v", v.Problems)
	}
	nobody := NewHistory(semaPlan(), nil, atMs(span))
	if v := Check(semaPlan(), nobody, semaSamples(span, 4, func(int) int { return 2 }), nil, nil, t0); !strings.Contains(v.Broken(), RuleOrphan) {
		t.Fatalf("want %q, got %q", RuleOrphan, v.Broken())
	}
}

// A waiter of the Semaphore asleep past Bound while none of its permits is
// used fails.
func TestCheckSemaOversleep(t *testing.T) {
	span := int((Bound + time.Second) / time.Millisecond)
	events := []judge.Event{ev("p1", judge.KindWait, 0, 0, ""), ev("p1", judge.KindEnter, 1, span, ""), ev("p1", judge.KindExit, 1, span+10, "")}
	h := NewHistory(semaPlan(), events, atMs(span+20))
	if v := Check(semaPlan(), h, semaSamples(span+20, 2, func(int) int { return 0 }), nil, nil, t0); !strings.Contains(v.Broken(), RuleOversleep) {
		t.Fatalf("want %q, got %q", RuleOversleep, v.Broken())
	}
}

func latchPlan() *Plan {
	return &Plan{Seed: 1, Kind: KindLatch, Procs: []Proc{{ID: "p1", Role: RoleLatch}, {ID: "p2", Role: RoleLatch}},
		Rounds: []Round{{At: 0, Count: 2, SetBy: "p1"}}}
}

func call(proc, kind string, startMs, endMs int, outcome string) judge.Event {
	return ev(proc, kind, 0, startMs, judge.FormatCall(atMs(endMs), outcome))
}

// latchSamples: L0 closed from 10 ms until openMs.
func latchSamples(ms, openMs int) []Sample {
	var out []Sample
	for at := 0; at <= ms; at += 20 {
		out = append(out, Sample{At: atMs(at), Known: true, Held: map[string]bool{LatchName(0): at >= 10 && at < openMs}})
	}
	return out
}

// A Wait that returns nil after one CountDown of two fails; after two, it
// passes.
func TestCheckLatchOpensOnlyOnItsCountDowns(t *testing.T) {
	events := []judge.Event{
		call("p1", judge.KindLatchSet, 0, 5, "set=true <nil>"),
		ev("p2", judge.KindLatchWait, 0, 20, ""),
		call("p1", judge.KindLatchCount, 100, 105, "<nil>"),
		ev("p2", judge.KindLatchOpen, 0, 150, "<nil>"),
	}
	plan := latchPlan()
	v := Check(plan, NewHistory(plan, events, atMs(300)), latchSamples(300, 150), nil, nil, t0)
	if !strings.Contains(v.Broken(), RuleLatchOpen) {
		t.Fatalf("want %q, got %q", RuleLatchOpen, v.Broken())
	}
	events = append(events[:3], call("p2", judge.KindLatchCount, 120, 125, "<nil>"), events[3])
	if v := Check(plan, NewHistory(plan, events, atMs(300)), latchSamples(300, 125), nil, nil, t0); v.Failed() {
		t.Fatalf("two CountDowns: got %v", v.Problems)
	}
}

// TrySetCount of a new latch reporting false, nil is a wrong result; a Wait
// asleep past Bound after its latch opened fails.
func TestCheckLatchResultAndOversleep(t *testing.T) {
	span := int((Bound + time.Second) / time.Millisecond)
	plan := latchPlan()
	events := []judge.Event{call("p1", judge.KindLatchSet, 0, 5, "set=false <nil>")}
	if v := Check(plan, NewHistory(plan, events, atMs(100)), latchSamples(100, 0), nil, nil, t0); !strings.Contains(v.Broken(), RuleLatchResult) {
		t.Fatalf("want %q, got %q", RuleLatchResult, v.Broken())
	}
	events = []judge.Event{
		call("p1", judge.KindLatchSet, 0, 5, "set=true <nil>"),
		ev("p2", judge.KindLatchWait, 0, 20, ""),
		call("p1", judge.KindLatchCount, 100, 105, "<nil>"), call("p1", judge.KindLatchCount, 110, 115, "<nil>"),
		ev("p2", judge.KindLatchOpen, 0, span, "<nil>"),
	}
	if v := Check(plan, NewHistory(plan, events, atMs(span)), latchSamples(span, 120), nil, nil, t0); !strings.Contains(v.Broken(), RuleOversleep) {
		t.Fatalf("want %q, got %q", RuleOversleep, v.Broken())
	}
}

// Every Semaphore plan holds 1 to MaxTake permits at a time, a crowd has
// 100+ waiters, and every latch round has exactly its count of CountDowns.
func TestGenerateSemaAndLatch(t *testing.T) {
	crowds := 0
	for seed := range int64(30) {
		for _, pr := range Generate(seed, KindSema, Default).Procs {
			for _, h := range pr.Holds {
				if h.Permits < 1 || h.Permits > MaxTake {
					t.Fatalf("seed %d: %s takes %d permits", seed, pr.ID, h.Permits)
				}
			}
			if pr.Role == RoleCrowd {
				crowds++
				if pr.Crowd < 100 {
					t.Fatalf("seed %d: a crowd of %d", seed, pr.Crowd)
				}
			}
		}
		p := Generate(seed, KindLatch, Default)
		counts := make([]int, len(p.Rounds))
		for _, pr := range p.Procs {
			for _, op := range pr.Latch {
				if op.Op == LatchCount {
					counts[op.Round]++
				}
			}
		}
		for i, r := range p.Rounds {
			if counts[i] != r.Count {
				t.Fatalf("seed %d: round %d counts %d of %d", seed, i, counts[i], r.Count)
			}
		}
	}
	if crowds == 0 {
		t.Fatal("no Semaphore plan of 30 has a crowd")
	}
}

// An Acquire refused as a capacity mismatch while its Semaphore has the
// capacity Redis records fails; a real mismatch passes.
func TestCheckSemaRefusal(t *testing.T) {
	refused := func(redis, mine int) []judge.Event {
		return []judge.Event{ev("p1", judge.KindWait, 0, 0, ""), ev("p1", judge.KindLockErr, 0, 10,
			fmt.Sprintf(`relock: invalid argument: semaphore "A" has %d permits in Redis, this Semaphore %d (all users pass the same)`, redis, mine))}
	}
	if v := Check(semaPlan(), NewHistory(semaPlan(), refused(5, 5), atMs(20)), nil, nil, nil, t0); !strings.Contains(v.Broken(), RuleRefused) {
		t.Fatalf("want %q, got %q", RuleRefused, v.Broken())
	}
	if v := Check(semaPlan(), NewHistory(semaPlan(), refused(4, 5), atMs(20)), nil, nil, nil, t0); v.Failed() {
		t.Fatalf("a real mismatch: got %v", v.Problems)
	}
}

// Where holds report their owners, a permit held by nobody is judged hold
// by hold: two streams of grants, each grant reaching its waiter 300 ms
// late, so that one is always in flight, are no orphan (the summed check
// reads them as one); one hold that its owner never enters is.
func TestCheckSemaOrphansHoldByHold(t *testing.T) {
	span := int((2*Bound + time.Second) / time.Millisecond)
	const late, hold = 300, 500 // ms
	offsets := []int{0, hold / 2}
	// Stream k's hold i is granted in Redis at off+i*hold, its waiter
	// inside from off+i*hold+late until the next grant's waiter enters,
	// when Redis releases it.
	var events []judge.Event
	for k, off := range offsets {
		for i := 0; off+(i+1)*hold+late <= span; i++ {
			p := fmt.Sprintf("p%d.%d", k, i)
			events = append(events, ev(p, judge.KindWait, 0, 0, ""),
				ev(p, judge.KindEnter, 1, off+i*hold+late, fmt.Sprintf("c%d:%d", k, i)),
				ev(p, judge.KindExit, 1, off+(i+1)*hold+late, ""))
		}
	}
	samples := func(stranded bool) []Sample {
		var out []Sample
		for ms := 0; ms <= span; ms += 20 {
			owners := map[string]bool{}
			for k, off := range offsets {
				if ms < off {
					continue
				}
				i := (ms - off) / hold
				owners[fmt.Sprintf("c%d:%d", k, i)] = true
				if i > 0 && ms < off+i*hold+late {
					owners[fmt.Sprintf("c%d:%d", k, i-1)] = true
				}
			}
			if stranded {
				owners["c9:stranded"] = true
			}
			out = append(out, Sample{At: atMs(ms), Known: true, Held: map[string]bool{ResA: true},
				Sema: SemaSample{Permits: 5, Used: len(owners), Owners: owners}})
		}
		return out
	}
	h := NewHistory(semaPlan(), events, atMs(span))
	if v := Check(semaPlan(), h, samples(false), nil, nil, t0); strings.Contains(v.Broken(), RuleOrphan) {
		t.Fatalf("grants each known to its waiter within %d ms: got %v", late, v.Problems)
	}
	if v := Check(semaPlan(), h, samples(true), nil, nil, t0); !strings.Contains(v.Broken(), RuleOrphan) {
		t.Fatalf("a hold whose owner never came: want %q, got %v", RuleOrphan, v.Problems)
	}
	unreported := samples(false)
	for i := range unreported {
		unreported[i].Sema.Owners = nil
	}
	if v := Check(semaPlan(), h, unreported, nil, nil, t0); !strings.Contains(v.Broken(), RuleOrphan) {
		t.Fatalf("the summed check reads the streams as one orphan: want %q, got %v", RuleOrphan, v.Problems)
	}
}

// Every kind's plans mix the three go-redis client setups, the same ones
// for the same seed, and the setups are drawn apart from the rest of the
// plan: a seed's holds and faults do not depend on them.
func TestGenerateMixesClientSetups(t *testing.T) {
	for _, kind := range Kinds {
		seen := map[string]int{}
		for seed := range int64(20) {
			p := Generate(seed, kind, Default)
			for i, pr := range p.Procs {
				seen[pr.Client]++
				if again := Generate(seed, kind, Default).Procs[i].Client; again != pr.Client {
					t.Fatalf("%s/%d: %s drew %q, then %q", kind, seed, pr.ID, pr.Client, again)
				}
				p.Procs[i].Client = ClientDefault
			}
			want := generate(seed, kind, Default)
			drawNests(seed, want) // a stream of its own too (see TestGenerateNestsHolds)
			if !reflect.DeepEqual(p, want) {
				t.Fatalf("%s/%d: the setups changed the rest of the plan", kind, seed)
			}
		}
		for _, setup := range []string{ClientDefault, ClientContextTimeout, ClientShortTimeouts} {
			if seen[setup] == 0 {
				t.Errorf("%s: no process with setup %q in 20 seeds", kind, setup)
			}
		}
	}
}

// Every kind whose holds re-enter gets nested holds — re-entries with a
// lease of their own, and for writers reads (downgrades) — drawn apart from
// the rest of the plan; a Semaphore's and a latch's plans get none.
func TestGenerateNestsHolds(t *testing.T) {
	for _, kind := range Kinds {
		nests, reads := 0, 0
		for seed := range int64(20) {
			p := Generate(seed, kind, Default)
			if !reflect.DeepEqual(p, Generate(seed, kind, Default)) {
				t.Fatalf("%s/%d: two draws differ", kind, seed)
			}
			for _, pr := range p.Procs {
				for _, h := range pr.Holds {
					if h.Nest == nil {
						continue
					}
					nests++
					if h.Nest.Read {
						reads++
						if pr.Role != RoleWrite {
							t.Fatalf("%s/%d: %s (%s) takes a nested read", kind, seed, pr.ID, pr.Role)
						}
					}
				}
			}
		}
		switch kind {
		case KindSema, KindLatch, KindDeadlock: // a deadlock plan's second hold is its pair's
			if nests > 0 {
				t.Errorf("%s: %d nested holds", kind, nests)
			}
		case KindRW:
			if reads == 0 || reads == nests {
				t.Errorf("%s: %d nested holds, %d of them reads: want both kinds", kind, nests, reads)
			}
		default:
			if nests == 0 {
				t.Errorf("%s: no nested hold in 20 seeds", kind)
			}
		}
	}
}
