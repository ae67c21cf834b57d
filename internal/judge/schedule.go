package judge

import (
	"strconv"
	"strings"
	"time"
)

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

// Event kinds of the Semaphore and CountDownLatch schedules. Each is
// reported once its call returned, At the call's start, with the time it
// returned and its outcome in the detail (FormatCall).
const (
	KindPermits     = "permits"      // SetPermits(token)
	KindLatchSet    = "latch-set"    // TrySetCount of round token
	KindLatchCount  = "latch-count"  // CountDown of round token
	KindLatchDelete = "latch-delete" // Delete of round token
	// KindLatchWait: a Wait on round token starts; KindLatchOpen: it
	// returned (detail: its error, or <nil>).
	KindLatchWait = "latch-wait"
	KindLatchOpen = "latch-open"
)

// Call reports one call that started at start and returned now, with
// outcome (a result and the error), as FormatCall writes them.
func (r *Reporter) Call(kind string, token int64, start time.Time, outcome string) error {
	return r.send(kind, token, start, FormatCall(time.Now(), outcome))
}

// Report sends one event as it is.
func (r *Reporter) Report(kind string, token int64, at time.Time, detail string) error {
	return r.send(kind, token, at, detail)
}

// FormatCall is the detail of a call's event: when it returned, then its
// outcome.
func FormatCall(end time.Time, outcome string) string {
	return strconv.FormatInt(end.UnixNano(), 10) + " " + outcome
}

// ParseCall splits what FormatCall wrote.
func ParseCall(detail string) (end time.Time, outcome string, ok bool) {
	ns, rest, _ := strings.Cut(detail, " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.Unix(0, n), rest, true
}
