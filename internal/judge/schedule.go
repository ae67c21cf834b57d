package judge

import "time"

// Event kinds of the fault-schedule run (internal/schedule), beside the
// safety run's.
const (
	// KindWait: the process starts a TryLock; it waits until its next
	// enter, void or lock-err.
	KindWait = "wait"
	// KindForce: the process called ForceUnlock (detail: its result).
	KindForce = "force"
	// KindClose: the process closed its Client.
	KindClose = "close"
)

// Wait reports that the process starts waiting for the lock.
func (r *Reporter) Wait(at time.Time) error { return r.send(KindWait, 0, at, "") }

// Force reports a ForceUnlock and its outcome.
func (r *Reporter) Force(at time.Time, outcome string) error {
	return r.send(KindForce, 0, at, outcome)
}

// Closed reports that the process closed its Client.
func (r *Reporter) Closed(at time.Time) error { return r.send(KindClose, 0, at, "") }
