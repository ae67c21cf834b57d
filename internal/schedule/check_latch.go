package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

// latchCall is one reported latch call.
type latchCall struct {
	proc       string
	start, end time.Time
	outcome    string
}

// latchRound is what the processes did to one round's latch.
type latchRound struct {
	sets, counts, deletes []latchCall
	waits                 []latchCall // start: Wait called; end: it returned (zero: never), outcome: its error
}

func latchRounds(plan *Plan, calls []judge.Event) []latchRound {
	rounds := make([]latchRound, len(plan.Rounds))
	for _, e := range calls {
		i := int(e.Token)
		if i < 0 || i >= len(rounds) {
			continue
		}
		rd := &rounds[i]
		end, outcome, _ := judge.ParseCall(e.Detail)
		c := latchCall{proc: e.Proc, start: e.At, end: end, outcome: outcome}
		switch e.Kind {
		case judge.KindLatchSet:
			rd.sets = append(rd.sets, c)
		case judge.KindLatchCount:
			rd.counts = append(rd.counts, c)
		case judge.KindLatchDelete:
			rd.deletes = append(rd.deletes, c)
		case judge.KindLatchWait:
			rd.waits = append(rd.waits, latchCall{proc: e.Proc, start: e.At})
		case judge.KindLatchOpen:
			for j := range rd.waits {
				if w := &rd.waits[j]; w.proc == e.Proc && w.end.IsZero() {
					w.end, w.outcome = e.At, e.Detail
					break
				}
			}
		}
	}
	return rounds
}

// checkLatch judges every round of a latch plan:
//   - a TrySetCount of the round's new latch that returned no error
//     reports true (nothing else set it);
//   - a Wait that started once the latch was set, while the test saw it
//     closed in Redis, and returned nil did so after at least Count
//     CountDowns that may have applied to it (started before it returned,
//     returned after the set started); a Wait that never had the latch
//     closed in Redis (a restored snapshot forgot the set) may read it as
//     never set;
//   - no waiter sleeps more than Bound while its latch is gone from Redis
//     (opened, deleted, forgotten): it returns, with nil or an error.
//
// Its Acquisitions are the Waits that returned nil.
func (v *Verdict) checkLatch(plan *Plan, calls []judge.Event, samples []Sample, pauses []Span) {
	for i, rd := range latchRounds(plan, calls) {
		name := LatchName(i)
		if len(rd.sets) == 0 {
			continue
		}
		set := rd.sets[0]
		if strings.HasPrefix(set.outcome, "set=false <nil>") {
			v.AddProblem(RuleLatchResult, "%s's TrySetCount(%d) of new latch %s at %s returned false, nil",
				set.proc, plan.Rounds[i].Count, name, v.rel(set.start))
		}
		if !strings.HasPrefix(set.outcome, "set=true") {
			continue
		}
		open := stretches(samples, func(s Sample) bool { return !s.Held[name] })
		for _, w := range rd.waits {
			if w.start.Before(set.end) {
				continue // it may have found the latch never set, which reads as open
			}
			end := w.end
			if end.IsZero() {
				end = samplesEnd(samples)
			}
			v.oversleep(Span{Proc: w.proc, Start: w.start, End: end}, open, pauses, name+" gone")
			if w.end.IsZero() || w.outcome != "<nil>" {
				continue
			}
			v.Acquisitions++
			if !sawClosed(samples, name, w.start, w.end) {
				continue
			}
			if n := countsBefore(rd.counts, set.start, w.end); n < plan.Rounds[i].Count {
				v.AddProblem(RuleLatchOpen, "%s's Wait on %s (count %d, set at %s) returned nil at %s after %d CountDowns%s",
					w.proc, name, plan.Rounds[i].Count, v.rel(set.start), v.rel(w.end), n, v.deletesBefore(rd.deletes, w.end))
			}
		}
	}
}

// countsBefore counts the CountDowns that may have applied to a latch set at
// set by the time until: those that started before until and returned after
// set.
func countsBefore(counts []latchCall, set, until time.Time) int {
	n := 0
	for _, c := range counts {
		if c.start.Before(until) && c.end.After(set) {
			n++
		}
	}
	return n
}

func (v *Verdict) deletesBefore(deletes []latchCall, until time.Time) string {
	var out []string
	for _, d := range deletes {
		if d.start.Before(until) {
			out = append(out, fmt.Sprintf("%s's Delete at %s (%s)", d.proc, v.rel(d.start), d.outcome))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; before it: " + strings.Join(out, ", ")
}

func samplesEnd(samples []Sample) time.Time {
	if len(samples) == 0 {
		return time.Time{}
	}
	return samples[len(samples)-1].At
}

// sawClosed reports whether the test saw latch name closed in Redis during
// [from, to], or in its last sample before from (taken within two sample
// periods, and known: no restart came between).
func sawClosed(samples []Sample, name string, from, to time.Time) bool {
	const recent = 50 * time.Millisecond
	for i, s := range samples {
		if s.At.After(to) {
			break
		}
		if s.At.Before(from) {
			last := i+1 == len(samples) || !samples[i+1].At.Before(from)
			if !last || from.Sub(s.At) > recent {
				continue
			}
		}
		if s.Known && s.Held[name] {
			return true
		}
	}
	return false
}
