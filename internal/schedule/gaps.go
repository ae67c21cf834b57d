package schedule

import (
	"fmt"
	"slices"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

// QuietBound is how long a waiter may sleep while what it waits for is free
// in Redis, away from every fault that may slow it (see noisy). A waiter is
// told to sleep until the end of what blocks it now, and woken when that
// end comes sooner (docs/internals.md, "No sleep outlasts the holder's
// remaining lease"), so only a fault leaves it asleep on a free lock for
// long; the fallbacks it must catch are the watchdog's 30 s lease and a
// FairLock waiter's or a writer's own retry, a third of the waiter timeout.
const QuietBound = time.Second

// quietGrace is how long after a fault ends a waiter is still taken as
// slowed by it: a reconnect, a retry's backoff (up to 1 s), a late grant.
const quietGrace = time.Second

// checkOversleep: no process waits longer than Bound while everything it
// waits for is free in Redis (not counting a pause the test inflicted on
// it: a stopped process cannot react), nor longer than QuietBound of that
// away from the faults that may slow it (noisy).
func (v *Verdict) checkOversleep(plan *Plan, waits []Span, samples []Sample, pauses []Span) {
	free := map[string][]Span{} // role -> stretches where all its resources are free
	for _, w := range waits {
		role := ""
		if pr := plan.Proc(w.Proc); pr != nil {
			role = pr.Role
		}
		if _, ok := free[role]; !ok {
			res := Resources(role)
			free[role] = stretches(samples, func(s Sample) bool {
				return !slices.ContainsFunc(res, func(r string) bool { return s.Held[r] })
			})
		}
		v.oversleep(w, free[role], pauses, fmt.Sprint(Resources(role)))
		v.quietOversleep(w, free[role], v.noisy(plan, w.Proc, pauses), fmt.Sprint(Resources(role)))
	}
}

// noisy returns the spans during which a fault may slow process proc's
// waits, sorted: a fault on its own connections (a delay for its span, a
// cut for the moment it is made, a cut placed a number of requests ahead
// from its arming to the end of the run, its moment unknown here), a pause
// of any process (pauses, as the test made them), a restored snapshot, each
// with quietGrace after. A fault on another process's connections delays
// that process, whose waits are its own; what it holds is not free.
func (v *Verdict) noisy(plan *Plan, proc string, pauses []Span) []Span {
	var out []Span
	add := func(from, to time.Time) { out = append(out, Span{Start: from, End: to.Add(quietGrace)}) }
	never := v.Start.Add(24 * time.Hour)
	if pr := plan.Proc(proc); pr != nil {
		for _, f := range pr.Conn {
			at := v.Start.Add(f.At)
			switch f.Op {
			case OpDelay:
				add(at, at.Add(f.For+f.Delay))
			case OpCut:
				add(at, at)
			default:
				add(at, never)
			}
		}
	}
	for _, p := range pauses {
		add(p.Start, p.End)
	}
	for _, f := range plan.Faults {
		at := v.Start.Add(f.At)
		switch f.Op {
		case FaultRestore:
			add(at, at.Add(f.For+Bound)) // the restart, and the stale holds' ForceUnlock
		case FaultReshard:
			add(at, at.Add(f.For+reshardSlack)) // the MIGRATEs, then every master's SETSLOT
		}
	}
	sortSpans(out)
	return out
}

// quietOversleep judges one wait w against the stretches during which
// what it waits for is free, but only away from noisy: there it may sleep
// QuietBound at most.
func (v *Verdict) quietOversleep(w Span, free, noisy []Span, what string) {
	for _, f := range free {
		s := Span{Start: judge.Later(w.Start, f.Start), End: judge.Earlier(w.End, f.End)}
		if !s.End.After(s.Start) {
			continue
		}
		for _, gap := range uncovered(s, noisy) {
			d := gap.End.Sub(gap.Start)
			v.MaxQuietOversleep = max(v.MaxQuietOversleep, d)
			if d > QuietBound {
				v.AddProblem(RuleOversleepQuiet, "%s waited from %s to %s; %v of it (from %s) with %s free in Redis and no fault near",
					w.Proc, v.rel(w.Start), v.rel(w.End), d.Round(time.Millisecond), v.rel(gap.Start), what)
			}
		}
	}
}

// oversleep judges one wait w against the stretches during which what it
// waits for is free (what names it).
func (v *Verdict) oversleep(w Span, free []Span, pauses []Span, what string) {
	for _, f := range free {
		start, end := judge.Later(w.Start, f.Start), judge.Earlier(w.End, f.End)
		for _, p := range pauses {
			if p.Proc == w.Proc && p.Start.Before(end) && p.End.After(start) {
				start = judge.Later(start, p.End)
			}
		}
		gap := end.Sub(start)
		v.MaxOversleep = max(v.MaxOversleep, gap)
		if gap > Bound {
			v.AddProblem(RuleOversleep, "%s waited from %s to %s; %v of it (from %s) with %s free in Redis",
				w.Proc, v.rel(w.Start), v.rel(w.End), gap.Round(time.Millisecond), v.rel(start), what)
		}
	}
}

// checkOrphans: no resource stays held in Redis longer than Bound while no
// process is inside a hold of it (a hold nobody uses, nobody will release).
func (v *Verdict) checkOrphans(holds []Interval, samples []Sample) {
	for _, r := range []string{ResA, ResB} {
		held := stretches(samples, func(s Sample) bool { return s.Held[r] })
		var inside []Span
		for _, iv := range holds {
			if slices.Contains(iv.Res, r) {
				inside = append(inside, Span{iv.Proc, iv.Enter, iv.End})
			}
		}
		sortSpans(inside)
		for _, h := range held {
			for _, gap := range uncovered(h, inside) {
				d := gap.End.Sub(gap.Start)
				v.MaxOrphan = max(v.MaxOrphan, d)
				if d > Bound {
					v.AddProblem(RuleOrphan, "%s held in Redis from %s to %s (%v) with no process inside it",
						r, v.rel(gap.Start), v.rel(gap.End), d.Round(time.Millisecond))
				}
			}
		}
	}
}

// uncovered returns the parts of h that no span of cover (sorted by start)
// covers.
func uncovered(h Span, cover []Span) []Span {
	var out []Span
	at := h.Start
	for _, c := range cover {
		if !c.End.After(at) || !c.Start.Before(h.End) {
			continue
		}
		if c.Start.After(at) {
			out = append(out, Span{Start: at, End: c.Start})
		}
		at = judge.Later(at, c.End)
		if !at.Before(h.End) {
			return out
		}
	}
	return append(out, Span{Start: at, End: h.End})
}
