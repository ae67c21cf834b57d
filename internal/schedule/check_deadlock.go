package schedule

import (
	"strings"
	"time"

	"github.com/relock-go/relock/internal/judge"
)

// CallDeadlockWait is a deadlock plan's wait for the second resource of a
// pair, reported as a call (judge.Reporter.Call) once it returned, with one
// of the outcomes below and the error.
const CallDeadlockWait = "deadlock-wait"

// Outcomes of a CallDeadlockWait.
const (
	WaitGranted  = "granted" // it got the second resource
	WaitVictim   = "victim"  // ErrDeadlock: detection chose it
	WaitBound    = "bound"   // it reached DeadlockWait: a deadlock not broken
	WaitFailed   = "failed"  // another error: a fault, the run's stop
	RuleUnbroken = "deadlock not broken"
)

// checkDeadlockWaits: no wait for a second resource reaches DeadlockWait.
// It counts the victims (Verdict.Deadlocks) and the longest wait that ended
// otherwise than by a grant (Verdict.MaxBreak).
func (v *Verdict) checkDeadlockWaits(calls []judge.Event) {
	for _, e := range calls {
		if e.Kind != CallDeadlockWait {
			continue
		}
		end, outcome, ok := judge.ParseCall(e.Detail)
		if !ok {
			v.AddProblem(RuleRun, "malformed deadlock wait of %s: %q", e.Proc, e.Detail)
			continue
		}
		waited := end.Sub(e.At)
		switch {
		case strings.HasPrefix(outcome, WaitBound):
			v.AddProblem(RuleUnbroken, "%s waited for its second resource from %s for %v: %s",
				e.Proc, v.rel(e.At), waited.Round(time.Millisecond), outcome)
		case strings.HasPrefix(outcome, WaitVictim):
			v.Deadlocks++
			v.MaxBreak = max(v.MaxBreak, waited)
		}
	}
}

// CheckFinished, once a deadlock plan's run has ended: every process took
// all its holds within DeadlockRun.
func (v *Verdict) CheckFinished(h *History) {
	if v.Plan.Kind != KindDeadlock {
		return
	}
	for _, pr := range v.Plan.Procs {
		if !h.Done[pr.ID] {
			v.AddProblem(RuleUnbroken, "%s did not take all its holds within %v", pr.ID, DeadlockRun)
		}
	}
}
