package relock

import (
	"sync/atomic"
	"time"
)

// lockCalls counts a Client's bounded Lock calls in flight (a context that
// can end, or TryLock's wait), whose requests run detached, so that Close
// can wait for them: a call whose attempt is in flight when Close begins
// stops waiting for it (Close's closing ends the wait as a bound does) and
// hands the request to a background settlement that releases whatever it
// took (bounded.go). Close waits, within its own bound, until every such
// call has returned, so that the settlement is one Close waits for too
// (c.bg), not a goroutine that a process ending after Close cuts short,
// leaving a part it took held for its lease. An unbounded call runs its
// requests on the caller's goroutine and settles them there before it
// returns; Close does not wait for it. A MultiLock over several Clients
// counts with, and wakes at the Close of, the Client of its first part,
// which also runs its settlement.
type lockCalls struct {
	n       atomic.Int64
	stopped atomic.Bool
	idle    chan struct{} // a value when the last call leaves after stop
}

func (l *lockCalls) init() { l.idle = make(chan struct{}, 1) }

// enter counts a call in, or fails it with ErrClientClosed once Close has
// begun waiting for the calls.
func (l *lockCalls) enter() error {
	l.n.Add(1)
	if l.stopped.Load() {
		l.leave()
		return ErrClientClosed
	}
	return nil
}

// leave counts a call out.
func (l *lockCalls) leave() {
	if l.n.Add(-1) == 0 && l.stopped.Load() {
		select {
		case l.idle <- struct{}{}:
		default:
		}
	}
}

// drain stops new calls and waits until the calls in flight have returned
// or until has passed.
func (l *lockCalls) drain(until time.Time) {
	l.stopped.Store(true)
	if l.n.Load() == 0 {
		return
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	for l.n.Load() > 0 {
		select {
		case <-l.idle:
		case <-t.C:
			return
		}
	}
}
