package judge

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// lockLost is the text of relock.ErrLockLost, which the cause of a hold
// context lost to the lock ending (not to Unlock or Close) wraps.
const lockLost = "relock: lock lost"

// Interval is one hold as its process lived it: from the moment Lock
// returned (enter) to the moment the process left (exit) or was told the hold
// was lost (lost).
type Interval struct {
	Proc      string
	Token     int64
	Enter     time.Time
	End       time.Time
	Ended     string // KindExit, KindLost, or "open" (the process never said)
	Cause     string // lost: the context's cause
	UnlockErr string // Unlock's error, if any
}

// Signalled reports whether the hold ended because the process was told it
// had lost the lock (its context cancelled with ErrLockLost).
//
// A holder is told either by its hold context (ended with ErrLockLost) or,
// at the latest, by its Unlock returning ErrLockLost. The second is the
// only way for a holder that was frozen (SIGSTOP, a GC or VM pause) past its
// lease: it cannot learn anything while it does not run, so the resource's
// fencing check (the tokens must order the overlap) is what protects the
// data then — which is exactly the library's promise.
func (iv Interval) Signalled() bool {
	return (iv.Ended == KindLost && strings.Contains(iv.Cause, lockLost)) || strings.Contains(iv.UnlockErr, lockLost)
}

// Overlap is a pair of holds of different processes that were both live at
// once: Later entered while Earlier had not yet exited or been told.
type Overlap struct {
	Earlier, Later Interval
	Ordered        bool          // Later's token is strictly larger
	Told           bool          // Earlier was told (lost with ErrLockLost)
	Duration       time.Duration // how long both were inside
}

// Allowed is the rule of the run: two holds may overlap only when the
// fencing tokens order them (a fenced resource accepts the later and rejects
// the earlier) and the earlier holder was told it lost the lock.
func (o Overlap) Allowed() bool { return o.Ordered && o.Told }

// Verdict is the analysis of one run.
type Verdict struct {
	Start     time.Time // first event
	Procs     []string
	Intervals []Interval // in enter order
	Faults    []Fault
	events    []Event

	Acquisitions int
	PerProc      map[string]int
	Overlaps     []Overlap
	Ordered      int // overlaps the tokens order (allowed if the loser was told)
	Unordered    int // overlaps whose tokens do not order them
	Untold       int // overlaps whose earlier holder was not told
	Regressions  [][2]Interval
	Signalled    int // holds that ended with lost / ErrLockLost
	OtherEnds    int // holds that ended with lost for another cause
	LostAtUnlock int // holds that exited believing, and Unlock said ErrLockLost
	UnlockErrs   int // other Unlock errors
	Voids        int // grants lost before they could be entered
	LockErrs     int // TryLock errors (Redis down, wait exhausted)
	MaxOverlap   time.Duration
	Handoffs     []time.Duration // per fault: injection to the next enter
	MaxHandoff   time.Duration
	Leftover     []string // keys left in Redis without a TTL

	Findings
}

// Analyze judges the events and faults of one run of procs.
func Analyze(events []Event, faults []Fault, procs []string) *Verdict {
	v := &Verdict{Procs: procs, Faults: faults, PerProc: make(map[string]int)}
	v.events = append([]Event(nil), events...)
	slices.SortStableFunc(v.events, func(a, b Event) int { return a.At.Compare(b.At) })
	if len(v.events) > 0 {
		v.Start = v.events[0].At
	}
	for _, f := range faults {
		if v.Start.IsZero() || f.Start.Before(v.Start) {
			v.Start = f.Start
		}
	}
	v.buildIntervals(events)
	for _, p := range procs {
		if v.PerProc[p] == 0 {
			v.problem(RuleProgress, "%s made no progress: it never entered the critical section", p)
		}
	}
	v.checkOverlaps()
	v.checkTokenOrder()
	v.measureHandoffs(faults)
	return v
}

// intervalBuilder turns the events into holds, per process in the order it
// reported (a process is sequential: enter, then exit or lost, then maybe
// unlock-err).
type intervalBuilder struct {
	v      *Verdict
	open   map[string]int // proc -> index in v.Intervals of its open hold
	last   map[string]int // proc -> index of its last hold
	lastAt map[string]time.Time
}

// buildIntervals fills v.Intervals, sorted by entry, and the counts of
// ends, errors and voids.
func (v *Verdict) buildIntervals(events []Event) {
	b := &intervalBuilder{v: v, open: map[string]int{}, last: map[string]int{}, lastAt: map[string]time.Time{}}
	for _, e := range events { // arrival order per process is report order
		b.lastAt[e.Proc] = e.At
		switch e.Kind {
		case KindEnter:
			b.enter(e)
		case KindExit, KindLost:
			b.end(e)
		case KindUnlockErr:
			b.unlockErr(e)
		case KindVoid:
			v.Voids++
		case KindLockErr:
			v.LockErrs++
		}
	}
	for p, i := range b.open {
		iv := &v.Intervals[i]
		iv.End = b.lastAt[p]
		v.problem(RuleRun, "%s never ended its hold with token %d (entered at %s)", p, iv.Token, v.rel(iv.Enter))
	}
	slices.SortStableFunc(v.Intervals, func(a, b Interval) int { return a.Enter.Compare(b.Enter) })
}

func (b *intervalBuilder) enter(e Event) {
	v := b.v
	if i, ok := b.open[e.Proc]; ok {
		v.problem(RuleRun, "%s entered (token %d) while its hold with token %d was still open", e.Proc, e.Token, v.Intervals[i].Token)
	}
	v.Intervals = append(v.Intervals, Interval{Proc: e.Proc, Token: e.Token, Enter: e.At, Ended: "open"})
	b.open[e.Proc] = len(v.Intervals) - 1
	b.last[e.Proc] = len(v.Intervals) - 1
	v.Acquisitions++
	v.PerProc[e.Proc]++
}

func (b *intervalBuilder) end(e Event) {
	v := b.v
	i, ok := b.open[e.Proc]
	if !ok {
		v.problem(RuleRun, "%s reported %s (token %d) without an open hold", e.Proc, e.Kind, e.Token)
		return
	}
	delete(b.open, e.Proc)
	iv := &v.Intervals[i]
	iv.End, iv.Ended, iv.Cause = e.At, e.Kind, e.Detail
	if e.Kind == KindLost {
		if iv.Signalled() {
			v.Signalled++
		} else {
			v.OtherEnds++
		}
	}
}

func (b *intervalBuilder) unlockErr(e Event) {
	v := b.v
	if e.Token == 0 {
		v.UnlockErrs++ // of a void grant
		return
	}
	i, ok := b.last[e.Proc]
	if !ok {
		return
	}
	v.Intervals[i].UnlockErr = e.Detail
	if v.Intervals[i].Ended == KindExit && strings.Contains(e.Detail, lockLost) {
		v.LostAtUnlock++
	} else if !strings.Contains(e.Detail, lockLost) {
		v.UnlockErrs++
	}
}

// checkOverlaps finds the holds a later hold entered before they ended. One
// problem per earlier hold (a holder stopped for seconds overlaps every hold
// taken meanwhile), showing its first overlap that breaks the rule.
func (v *Verdict) checkOverlaps() {
	for i, a := range v.Intervals {
		var bad []Overlap
		for _, b := range v.Intervals[i+1:] {
			if !b.Enter.Before(a.End) {
				break
			}
			if b.Proc == a.Proc {
				continue
			}
			o := Overlap{Earlier: a, Later: b, Ordered: b.Token > a.Token, Told: a.Signalled(),
				Duration: Earlier(a.End, b.End).Sub(b.Enter)}
			v.countOverlap(o)
			if !o.Allowed() {
				bad = append(bad, o)
			}
		}
		if len(bad) > 0 {
			v.reportOverlap(bad)
		}
	}
}

func (v *Verdict) countOverlap(o Overlap) {
	v.Overlaps = append(v.Overlaps, o)
	v.MaxOverlap = max(v.MaxOverlap, o.Duration)
	if o.Ordered {
		v.Ordered++
	} else {
		v.Unordered++
	}
	if !o.Told {
		v.Untold++
	}
}

// reportOverlap states the problem of one earlier hold's overlaps that
// break the rule, bad[0] in full.
func (v *Verdict) reportOverlap(bad []Overlap) {
	o, a, b := bad[0], bad[0].Earlier, bad[0].Later
	var why, rules []string
	if !o.Ordered {
		why = append(why, fmt.Sprintf("tokens do not order them (%d then %d)", a.Token, b.Token))
		rules = append(rules, RuleUnordered)
	}
	if !o.Told {
		why = append(why, fmt.Sprintf("%s was not told (it ended with %s%s)", a.Proc, a.Ended, suffix(a.Cause, a.UnlockErr)))
		rules = append(rules, RuleUntold)
	}
	more := ""
	if len(bad) > 1 {
		more = fmt.Sprintf(" (and %d more holds entered before %s ended)", len(bad)-1, a.Proc)
	}
	v.problem(strings.Join(rules, "+"), "overlap of %v: %s (token %d, %s..%s) and %s (token %d, entered %s): %s%s\n%s",
		o.Duration.Round(time.Microsecond), a.Proc, a.Token, v.rel(a.Enter), v.rel(a.End), b.Proc, b.Token, v.rel(b.Enter),
		strings.Join(why, "; "), more, v.context(a.Enter, Later(a.End, b.Enter)))
}

// checkTokenOrder: tokens strictly increase in enter order, overlapping or
// not.
func (v *Verdict) checkTokenOrder() {
	for i := 1; i < len(v.Intervals); i++ {
		a, b := v.Intervals[i-1], v.Intervals[i]
		if b.Token <= a.Token {
			v.Regressions = append(v.Regressions, [2]Interval{a, b})
			v.problem(RuleTokenOrder, "token went from %d (%s, entered %s) to %d (%s, entered %s)\n%s",
				a.Token, a.Proc, v.rel(a.Enter), b.Token, b.Proc, v.rel(b.Enter), v.context(a.Enter, b.Enter))
		}
	}
}

// measureHandoffs measures, from each fault, the time to the first hold
// entered after it.
func (v *Verdict) measureHandoffs(faults []Fault) {
	for _, f := range faults {
		i, _ := slices.BinarySearchFunc(v.Intervals, f.Start, func(iv Interval, t time.Time) int { return iv.Enter.Compare(t) })
		if i == len(v.Intervals) {
			v.problem(RuleProgress, "no hold was entered after the %s fault injected at %s", f.Kind, v.rel(f.Start))
			continue
		}
		d := v.Intervals[i].Enter.Sub(f.Start)
		v.Handoffs = append(v.Handoffs, d)
		v.MaxHandoff = max(v.MaxHandoff, d)
	}
}

// AddLeftover records keys found in Redis after the run without a TTL.
func (v *Verdict) AddLeftover(keys []string) {
	if len(keys) == 0 {
		return
	}
	v.Leftover = append(v.Leftover, keys...)
	shown := keys
	if len(shown) > 10 {
		shown = shown[:10]
	}
	v.problem(RuleTTL, "%d key(s) left in Redis without a TTL after the run: %s", len(keys), strings.Join(shown, ", "))
}

// AddProblem records a rule the run broke that the events do not show (a
// process that failed, a protocol error).
func (v *Verdict) AddProblem(rule, format string, args ...any) { v.problem(rule, format, args...) }

// Broken lists the rules the run broke, with how many times, most
// important first.
func (v *Verdict) Broken() string { return v.Count(rules) }

// Summary is one line of figures.
func (v *Verdict) Summary() string {
	return fmt.Sprintf("%d acquisitions (%s), %d faults; overlaps: %d ordered by tokens, %d unordered, %d loser not told (max %v); "+
		"%d losses signalled, %d other ends, %d found lost only at Unlock, %d void grants, %d lock errors, %d unlock errors; max hand-off %v; %d keys without TTL",
		v.Acquisitions, v.perProc(), len(v.Faults), v.Ordered, v.Unordered, v.Untold, v.MaxOverlap.Round(time.Millisecond),
		v.Signalled, v.OtherEnds, v.LostAtUnlock, v.Voids, v.LockErrs, v.UnlockErrs, v.MaxHandoff.Round(time.Millisecond), len(v.Leftover))
}

func (v *Verdict) perProc() string {
	var parts []string
	for _, p := range v.Procs {
		parts = append(parts, fmt.Sprintf("%s %d", p, v.PerProc[p]))
	}
	return strings.Join(parts, ", ")
}

// The rules of the run, as Broken names them.
const (
	RuleUnordered  = "overlap the tokens do not order"
	RuleUntold     = "overlap, loser not told"
	RuleTokenOrder = "token not above the previous one"
	RuleProgress   = "no progress"
	RuleTTL        = "key without TTL"
	RuleRun        = "run"
)

var rules = []string{RuleUnordered, RuleUntold, RuleTokenOrder, RuleProgress, RuleTTL, RuleRun}

// problem records a broken rule (several joined by "+").
func (v *Verdict) problem(rule, format string, args ...any) {
	v.Record(rule, fmt.Sprintf(format, args...))
}

// rel is t as milliseconds since the start of the run.
func (v *Verdict) rel(t time.Time) string {
	return fmt.Sprintf("+%.1fms", float64(t.Sub(v.Start))/float64(time.Millisecond))
}

// context lists the events and faults from a little before from to a little
// after to, at most a screenful.
func (v *Verdict) context(from, to time.Time) string {
	const margin = 20 * time.Millisecond
	lo, hi := from.Add(-margin), to.Add(margin)
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for _, f := range v.Faults {
		if !f.End.Before(lo) && !f.Start.After(hi) {
			lines = append(lines, line{f.Start, fmt.Sprintf("FAULT %s on %s (until %s)", f.Kind, f.Target, v.rel(f.End))})
		}
	}
	for _, e := range v.events {
		if !e.At.Before(lo) && !e.At.After(hi) && e.Kind != KindLockErr {
			lines = append(lines, line{e.At, e.String()})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	const head, tail = 10, 6
	var b strings.Builder
	for i, l := range lines {
		if i == head && len(lines) > head+tail {
			fmt.Fprintf(&b, "\t\t... %d more\n", len(lines)-head-tail)
		}
		if i >= head && i < len(lines)-tail {
			continue
		}
		fmt.Fprintf(&b, "\t\t%10s  %s\n", v.rel(l.at), l.text)
	}
	return strings.TrimRight(b.String(), "\n")
}

func suffix(cause, unlockErr string) string {
	s := ""
	if cause != "" {
		s += ": " + cause
	}
	if unlockErr != "" {
		s += "; Unlock: " + unlockErr
	}
	return s
}
