package schedule

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

// capacityDuring is the largest capacity Redis recorded during [from, to],
// and in the first known sample after it (a SetPermits that served the
// waiter, or a grant that recorded its own capacity on an idle semaphore,
// just before that sample); with none recorded in a known
// sample then (the semaphore idle, or a hold shorter than a sample), the
// largest ever seen.
func capacityDuring(samples []Sample, from, to time.Time) int {
	top, all, after := 0, 0, false
	for i, s := range samples {
		if !s.Known {
			continue
		}
		all = max(all, s.Sema.Permits)
		next := s.At
		if i+1 < len(samples) {
			next = samples[i+1].At
		}
		if !next.Before(from) && !s.At.After(to.Add(sampleSlack)) {
			top = max(top, s.Sema.Permits)
			continue
		}
		if s.At.After(to.Add(sampleSlack)) && !after {
			// The first known sample after: samples come late when Redis
			// or the machine is slow.
			top, after = max(top, s.Sema.Permits), true
		}
	}
	if top == 0 {
		return all
	}
	return top
}

// sampleSlack is how far past a hold's enter checkCapacity looks for the
// capacity its grant recorded.
const sampleSlack = 50 * time.Millisecond

// checkCapacity: whenever a hold enters, the permits of the holds its
// processes believe live (its own included) fit in the capacity Redis
// recorded while it waited (a SetPermits, or an idle semaphore's next user
// recording its own) — unless a holder was told it lost its permits, or the
// test took them away (a restored snapshot). Tokens are permits.
func (v *Verdict) checkCapacity(h *History, samples []Sample, taken []time.Time) {
	for _, b := range h.Holds {
		sum, who := int(b.Token), []string{b.Proc}
		for _, a := range h.Holds {
			if a.Proc == b.Proc || a.Enter.After(b.Enter) || !a.End.After(b.Enter) {
				continue
			}
			if a.Told() || within(taken, a.Enter, b.Enter) {
				continue
			}
			sum += int(a.Token)
			who = append(who, a.Proc)
		}
		if limit := capacityDuring(samples, waitStart(h.Waits, b), b.Enter); limit > 0 && sum > limit {
			v.AddProblem(RuleOverCapacity, "%d permits live at %s (%s entering with %d; holders not told: %s), capacity at most %d",
				sum, v.rel(b.Enter), b.Proc, b.Token, strings.Join(who, " "), limit)
		}
	}
}

// waitStart is when the wait that ended in hold b began (b's enter if none
// was reported).
func waitStart(waits []Span, b Interval) time.Time {
	for _, w := range waits {
		if w.Proc == b.Proc && w.End.Equal(b.Enter) {
			return w.Start
		}
	}
	return b.Enter
}

// checkPermitsInRedis compares the permits Redis counts as used with those
// of the holds the processes are inside: fewer in Redis for longer than
// Bound is a loss nobody was told of (unless the test took the permits
// away); more for longer than Bound is a permit held by nobody (a leaked
// acquire, a release lost). Where the holds report their owners and the
// samples Redis's, a permit held by nobody is judged hold by hold
// (checkOwnersInRedis): the sum cannot tell one hold stranded for 5 s from
// a stream of grants each waiting 250 ms for a slow subscriber to bring it
// to its waiter, always one in flight.
func (v *Verdict) checkPermitsInRedis(holds []Interval, samples []Sample, taken []time.Time) {
	inside := func(at time.Time, excuseTaken bool) int {
		n := 0
		for _, iv := range holds {
			if iv.Enter.After(at) || !iv.End.After(at) {
				continue
			}
			if excuseTaken && (iv.Told() || within(taken, iv.Enter, at)) {
				continue
			}
			n += int(iv.Token)
		}
		return n
	}
	for _, s := range stretches(samples, func(s Sample) bool { return s.Sema.Used < inside(s.At, true) }) {
		if d := s.End.Sub(s.Start); d > Bound {
			v.AddProblem(RuleUnsignalled, "from %s to %s (%v) Redis counted fewer permits used than the holders believe they hold",
				v.rel(s.Start), v.rel(s.End), d.Round(time.Millisecond))
		}
	}
	if ownersReported(holds, samples) {
		v.checkOwnersInRedis(holds, samples)
		return
	}
	for _, s := range stretches(samples, func(s Sample) bool { return s.Sema.Used > inside(s.At, false) }) {
		d := s.End.Sub(s.Start)
		v.MaxOrphan = max(v.MaxOrphan, d)
		if d > Bound {
			v.AddProblem(RuleOrphan, "from %s to %s (%v) Redis counted more permits used than the holders hold",
				v.rel(s.Start), v.rel(s.End), d.Round(time.Millisecond))
		}
	}
}

// ownersReported reports whether every hold reported its owner and every
// sample read Redis's.
func ownersReported(holds []Interval, samples []Sample) bool {
	for _, iv := range holds {
		if iv.Owner == "" {
			return false
		}
	}
	for _, s := range samples {
		if s.Known && s.Sema.Owners == nil {
			return false
		}
	}
	return true
}

// checkOwnersInRedis: no hold Redis records stays longer than Bound while
// its owner is not inside it — granted to a waiter that never came, or
// left behind by a release that was lost.
func (v *Verdict) checkOwnersInRedis(holds []Interval, samples []Sample) {
	inside := map[string][]Span{}
	for _, iv := range holds {
		inside[iv.Owner] = append(inside[iv.Owner], Span{iv.Proc, iv.Enter, iv.End})
	}
	seen := map[string]bool{}
	for _, s := range samples {
		for o := range s.Sema.Owners {
			seen[o] = true
		}
	}
	for _, o := range slices.Sorted(maps.Keys(seen)) {
		in := inside[o]
		sortSpans(in)
		for _, held := range stretches(samples, func(s Sample) bool { return s.Sema.Owners[o] }) {
			for _, gap := range uncovered(held, in) {
				d := gap.End.Sub(gap.Start)
				v.MaxOrphan = max(v.MaxOrphan, d)
				if d > Bound {
					v.AddProblem(RuleOrphan, "from %s to %s (%v) Redis recorded a hold of %s, who was not inside it",
						v.rel(gap.Start), v.rel(gap.End), d.Round(time.Millisecond), o)
				}
			}
		}
	}
}

// refusedSame matches the refusal of an Acquire whose Semaphore has the
// capacity Redis records.
var refusedSame = regexp.MustCompile(`has (\d+) permits in Redis, this Semaphore (\d+)\b`)

// checkRefusals: an Acquire is refused for a capacity mismatch only when
// its Semaphore's capacity differs from the one Redis records (a SetPermits
// of the same value must not refuse it).
func (v *Verdict) checkRefusals(calls []judge.Event) {
	for _, e := range calls {
		if e.Kind != judge.KindLockErr {
			continue
		}
		if m := refusedSame.FindStringSubmatch(e.Detail); m != nil && m[1] == m[2] {
			v.AddProblem(RuleRefused, "%s at %s: %s", e.Proc, v.rel(e.At), e.Detail)
		}
	}
}

// SemaWaiterTimeout is the waiter timeout (relock.WithWaiterTimeout) of a
// Semaphore schedule's Clients: three times the default, so that a waiter's
// periodic attempt, a third of it, comes 10 s apart. A waiter must then be
// served by the releases, expiries and reconnections it is told of within
// Bound; one stranded until that fallback shows as asleep while permits
// are free.
const SemaWaiterTimeout = 30 * time.Second

// requeued judges the waits during which the test deleted the Semaphore
// (after a restored snapshot: its queue with it) from the waiter's next
// periodic attempt on, when it queues again.
func requeued(waits []Span, taken []time.Time) []Span {
	out := make([]Span, 0, len(waits))
	for _, w := range waits {
		for _, t := range taken {
			if t.After(w.Start) && t.Before(w.End) {
				w.Start = judge.Earlier(w.End, judge.Later(w.Start, t.Add(SemaWaiterTimeout/3)))
			}
		}
		out = append(out, w)
	}
	return out
}
