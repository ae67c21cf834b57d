package schedule

import (
	"fmt"
	"slices"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

// checkOversleep: no process waits longer than Bound while everything it
// waits for is free in Redis (not counting a pause the test inflicted on
// it: a stopped process cannot react).
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
