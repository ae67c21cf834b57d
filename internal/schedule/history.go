package schedule

import (
	"slices"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

// Texts of relock's errors as they reach the judge (the processes report
// error strings): ErrLockLost and ErrClientClosed.
const (
	lockLostText        = "relock: lock lost"
	clientClosedText    = "relock: client closed"
	invalidArgumentText = "relock: invalid argument"
)

// Interval is one hold as its process lived it.
type Interval struct {
	Proc      string
	Res       []string
	Read      bool   // a read hold: reads may overlap reads
	Token     int64  // 0: the type has none (ReadLock, MultiLock)
	Owner     string // the owner field Redis records the hold under ("": not reported)
	Enter     time.Time
	End       time.Time
	Ended     string // judge.KindExit, judge.KindLost, or "open"
	Cause     string
	UnlockErr string
}

// Told reports whether the process learned that it lost the hold: its
// context ended with ErrLockLost, or at the latest its Unlock said so (the
// only way for a process that was stopped past its lease).
func (iv Interval) Told() bool {
	return (iv.Ended == judge.KindLost && strings.Contains(iv.Cause, lockLostText)) ||
		strings.Contains(iv.UnlockErr, lockLostText)
}

// Span is a stretch of time of one process: a wait, a pause.
type Span struct {
	Proc       string
	Start, End time.Time
}

// History is what the processes reported, cut into holds and waits.
type History struct {
	Holds  []Interval // in enter order
	Waits  []Span
	Forces []time.Time     // ForceUnlock calls of the processes
	Closed map[string]bool // processes that closed their Client
	Done   map[string]bool
	Counts map[string]int // events by kind
	// Calls are the Semaphore's and latch's call events (judge.KindPermits,
	// judge.KindLatch*) and the acquires refused as invalid, in report
	// order per process.
	Calls []judge.Event
}

// NewHistory builds the history of plan's processes from their events; end
// closes what is still open.
func NewHistory(plan *Plan, events []judge.Event, end time.Time) *History {
	h := &History{Closed: map[string]bool{}, Done: map[string]bool{}, Counts: map[string]int{}}
	open := map[string]int{}          // proc -> index in Holds of its open hold
	last := map[string]int{}          // proc -> index of its last hold
	waiting := map[string]time.Time{} // proc -> start of its wait
	endWait := func(p string, at time.Time) {
		if s, ok := waiting[p]; ok {
			h.Waits = append(h.Waits, Span{p, s, at})
			delete(waiting, p)
		}
	}
	for _, e := range events { // per process, in report order
		h.Counts[e.Kind]++
		switch e.Kind {
		case judge.KindWait:
			endWait(e.Proc, e.At)
			waiting[e.Proc] = e.At
		case judge.KindEnter:
			endWait(e.Proc, e.At)
			h.Holds = append(h.Holds, newInterval(plan, e))
			open[e.Proc], last[e.Proc] = len(h.Holds)-1, len(h.Holds)-1
		case judge.KindExit, judge.KindLost:
			if i, ok := open[e.Proc]; ok {
				h.Holds[i].End, h.Holds[i].Ended, h.Holds[i].Cause = e.At, e.Kind, e.Detail
				delete(open, e.Proc)
			}
		case judge.KindUnlockErr:
			if i, ok := last[e.Proc]; ok && e.Token == h.Holds[i].Token {
				h.Holds[i].UnlockErr = e.Detail
			}
		case judge.KindForce:
			h.Forces = append(h.Forces, e.At)
		case judge.KindPermits, judge.KindLatchSet, judge.KindLatchCount, judge.KindLatchDelete,
			judge.KindLatchWait, judge.KindLatchOpen, CallDeadlockWait:
			h.Calls = append(h.Calls, e)
		case judge.KindVoid, judge.KindLockErr, judge.KindDone, judge.KindClose:
			if e.Kind == judge.KindLockErr && strings.Contains(e.Detail, invalidArgumentText) {
				h.Calls = append(h.Calls, e)
			}
			endWait(e.Proc, e.At)
			h.Done[e.Proc] = h.Done[e.Proc] || e.Kind == judge.KindDone
			h.Closed[e.Proc] = h.Closed[e.Proc] || e.Kind == judge.KindClose
		}
	}
	for p := range waiting {
		endWait(p, end)
	}
	for _, i := range open {
		h.Holds[i].End = end
	}
	slices.SortStableFunc(h.Holds, func(a, b Interval) int { return a.Enter.Compare(b.Enter) })
	return h
}

func newInterval(plan *Plan, e judge.Event) Interval {
	role := ""
	if pr := plan.Proc(e.Proc); pr != nil {
		role = pr.Role
	}
	if role == RoleDeadlock {
		// Its enter names the exclusive resources of the pair it holds.
		return Interval{Proc: e.Proc, Res: strings.Split(e.Detail, ","), Enter: e.At, Ended: "open"}
	}
	return Interval{Proc: e.Proc, Res: Resources(role), Read: role == RoleRead, Token: e.Token,
		Owner: e.Detail, Enter: e.At, Ended: "open"}
}

func shares(a, b []string) bool {
	for _, r := range a {
		if slices.Contains(b, r) {
			return true
		}
	}
	return false
}
