package schedule

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

// Bound is how long a waiter may sleep while the lock it waits for is free
// in Redis, and how long a lock may stay held in Redis with no process
// inside it. The documented bound is about 2 s (a wake-up lost, a waiter's
// own timer); this one is twice that, for a loaded 2-core machine, and still
// far below the fallback it must catch: the watchdog's 30 s lease.
const Bound = 4 * time.Second

// Rules a run can break, as Verdict.Broken names them.
const (
	RuleUnordered = "overlap the tokens do not order"
	RuleUntold    = "overlap, loser not told"
	RuleToken     = "token not above the previous one"
	RuleOversleep = "waiter asleep while the lock is free"
	// RuleOversleepQuiet is RuleOversleep's tighter bound, QuietBound,
	// away from the faults that may slow the waiter.
	RuleOversleepQuiet = "waiter asleep while the lock is free, no fault near"
	RuleOrphan         = "held in Redis by nobody"
	RuleLeftover       = "left held after the run"
	RuleRun            = "run"
	// Semaphore and latch rules.
	RuleOverCapacity = "permits over capacity, a loser not told"
	RuleUnsignalled  = "permits lost, holder not told"
	RuleLatchOpen    = "latch opened without its CountDowns"
	RuleLatchResult  = "latch call reported a wrong result"
	RuleRefused      = "acquire refused with the capacity Redis records"
)

var ruleOrder = []string{RuleUnordered, RuleUntold, RuleToken, RuleOverCapacity, RuleUnsignalled, RuleLatchOpen,
	RuleLatchResult, RuleRefused, RuleUnbroken, RuleOversleep, RuleOversleepQuiet, RuleOrphan, RuleLeftover, RuleRun}

// Sample is what the test saw in Redis at one moment: which resources had a
// holder. Known is false while Redis was down or being restored. For a
// Semaphore, Held[ResA] means that a waiter may have to wait (permits are in
// use and fewer than MaxTake are free) and Sema is its state; for a latch,
// Held[LatchName(i)] means that round i's latch is closed.
type Sample struct {
	At    time.Time
	Held  map[string]bool
	Known bool
	Sema  SemaSample
}

// SemaSample is a Semaphore's state in Redis; Permits is 0 when Redis
// records none (an idle Semaphore leaves nothing).
type SemaSample struct {
	Permits, Used, Waiters int
	// Owners are the owner fields of the holds Redis records (nil: not
	// read).
	Owners map[string]bool
}

// Verdict is the judgement of one run.
type Verdict struct {
	Plan         *Plan
	Start        time.Time
	Acquisitions int
	Overlaps     int // overlapping holds the rules allow (ordered, loser told)
	Told         int // holds that ended with ErrLockLost
	MaxOversleep time.Duration
	// MaxQuietOversleep is the longest sleep while free away from every
	// fault near the waiter (see QuietBound).
	MaxQuietOversleep time.Duration
	MaxOrphan         time.Duration
	MaxQueue          int           // the most waiters a Semaphore's samples saw queued
	Deadlocks         int           // a deadlock plan's waits that ended with ErrDeadlock
	MaxBreak          time.Duration // the longest of those waits
	judge.Findings
}

// Check judges a run: the history the processes reported, the samples of
// Redis, the windows during which each process was paused by the test, and
// the times the test itself took holds away (a restored snapshot, then
// ForceUnlock). A Semaphore's and a latch's runs have rules of their own
// (checkCapacity, checkPermitsInRedis, checkRefusals; checkLatch).
func Check(plan *Plan, h *History, samples []Sample, pauses []Span, takenAway []time.Time, start time.Time) *Verdict {
	v := &Verdict{Plan: plan, Start: start, Acquisitions: len(h.Holds)} // a latch's: its Waits that returned nil
	for _, iv := range h.Holds {
		if iv.Told() {
			v.Told++
		}
	}
	taken := append(slices.Clone(h.Forces), takenAway...)
	switch plan.BaseKind() {
	case KindSema:
		for _, s := range samples {
			v.MaxQueue = max(v.MaxQueue, s.Sema.Waiters)
		}
		v.checkCapacity(h, samples, taken)
		v.checkRefusals(h.Calls)
		v.checkPermitsInRedis(h.Holds, samples, taken)
		v.checkOversleep(plan, requeued(h.Waits, taken), samples, pauses)
	case KindLatch:
		v.checkLatch(plan, h.Calls, samples, pauses)
	case KindDeadlock:
		// Exclusive holds of A and D, and every deadlock broken. Waits are
		// not held to Bound: a deadlock's members wait until it breaks.
		v.checkOverlaps(h.Holds, taken)
		v.checkDeadlockWaits(h.Calls) // and, once the run ended, CheckFinished
	default:
		v.checkOverlaps(h.Holds, taken)
		v.checkTokens(h.Holds, taken)
		v.checkOversleep(plan, h.Waits, samples, pauses)
		v.checkOrphans(h.Holds, samples)
	}
	return v
}

// AddProblem records a broken rule found outside the history (the scan
// after the run, a process that failed).
func (v *Verdict) AddProblem(rule, format string, args ...any) {
	v.Record(rule, rule+": "+fmt.Sprintf(format, args...))
}

// Broken lists the broken rules with their counts.
func (v *Verdict) Broken() string { return v.Count(ruleOrder) }

func (v *Verdict) rel(t time.Time) string {
	return fmt.Sprintf("+%dms", t.Sub(v.Start).Milliseconds())
}

// checkOverlaps: two holds of different processes on a shared resource, not
// both reads, overlap only when the later one's token is larger (where both
// have one) and the earlier holder was told. A hold taken away on purpose
// (ForceUnlock, a restored snapshot) is told only at its next renewal or
// Unlock, which a fault may keep from telling: there the tokens alone must
// order the overlap. A hold taken away before its holder entered it (a
// grant whose message came late) is told the same way, and its token is the
// smaller: see takenBeforeEntry.
func (v *Verdict) checkOverlaps(holds []Interval, takenAway []time.Time) {
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if !b.Enter.Before(a.End) {
				continue
			}
			if b.Proc == a.Proc || (a.Read && b.Read) || !shares(a.Res, b.Res) {
				continue
			}
			ordered := a.Token == 0 || b.Token == 0 || b.Token > a.Token
			if ordered && (a.Told() || within(takenAway, a.Enter, b.Enter)) || takenBeforeEntry(a, b, takenAway) {
				v.Overlaps++
				continue
			}
			rule := RuleUntold
			if !ordered {
				rule = RuleUnordered
			}
			v.AddProblem(rule, "%s (token %d, %s..%s, ended %s %s%s) and %s (token %d, entered %s) both held %v",
				a.Proc, a.Token, v.rel(a.Enter), v.rel(a.End), a.Ended, a.Cause, unlockNote(a.UnlockErr),
				b.Proc, b.Token, v.rel(b.Enter), a.Res)
		}
	}
}

// takenBeforeEntry reports whether b, which entered while a held, is a
// hold taken away (ForceUnlock, a restored snapshot) before b entered it: a
// grant older than a's (the smaller token), whose message reached b late,
// taken away after it was granted and before a was. Its holder learns that
// at its next renewal or Unlock (b told), as any holder whose hold was
// taken away does, and a fenced resource refuses its writes, a's token
// being the larger. A token is the server's clock in µs at the grant (the
// schedule runs on one machine: the reports' clock too), so a take-away
// that may fall between the two grants is one reported between b's grant
// and b's entry.
func takenBeforeEntry(a, b Interval, takenAway []time.Time) bool {
	if a.Token == 0 || b.Token == 0 || b.Token >= a.Token || !b.Told() {
		return false
	}
	return within(takenAway, time.UnixMicro(b.Token), b.Enter)
}

// within reports whether one of ts lies in [from, to].
func within(ts []time.Time, from, to time.Time) bool {
	return slices.ContainsFunc(ts, func(t time.Time) bool { return !t.Before(from) && !t.After(to) })
}

func unlockNote(err string) string {
	if err == "" {
		return ""
	}
	return "; Unlock: " + err
}

// checkTokens: the tokens of exclusive holds of one resource increase in
// enter order, across every fault (a restored snapshot included), but for
// a hold taken away before its holder entered it (takenBeforeEntry), whose
// token is smaller than the one before it.
func (v *Verdict) checkTokens(holds []Interval, takenAway []time.Time) {
	last := map[string]Interval{}
	for _, iv := range holds {
		if iv.Token == 0 || iv.Read || len(iv.Res) != 1 {
			continue
		}
		r := iv.Res[0]
		prev, ok := last[r]
		if ok && takenBeforeEntry(prev, iv, takenAway) {
			continue
		}
		if ok && iv.Token <= prev.Token {
			v.AddProblem(RuleToken, "%s entered %s at %s with token %d, not above %s's %d (entered %s)",
				iv.Proc, r, v.rel(iv.Enter), iv.Token, prev.Proc, prev.Token, v.rel(prev.Enter))
		}
		last[r] = iv
	}
}

// stretches returns the maximal spans during which pred held for the known
// samples; a sample stands for the time until the next one.
func stretches(samples []Sample, pred func(Sample) bool) []Span {
	var out []Span
	var cur *Span
	for i, s := range samples {
		end := s.At
		if i+1 < len(samples) {
			end = samples[i+1].At
		}
		if s.Known && pred(s) {
			if cur == nil {
				out = append(out, Span{Start: s.At})
				cur = &out[len(out)-1]
			}
			cur.End = end
			continue
		}
		cur = nil
	}
	return out
}

func sortSpans(s []Span) {
	sort.Slice(s, func(i, j int) bool { return s[i].Start.Before(s[j].Start) })
}
