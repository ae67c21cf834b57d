package relock

import (
	"sync/atomic"
	"time"
)

// A Client's bounded calls (bounded.go) run on worker goroutines that stay
// a while for the next call, rather than on a goroutine started per call:
// such a goroutine grows its stack through go-redis's call path every time
// (runtime.copystack was 6.6% of the CPU of 64 Clients each locking and
// unlocking its own key), and starting one costs too.

// workerIdle is how long an idle worker waits for a call before it ends
// (up to twice that: see work).
const workerIdle = time.Second

// workers is a Client's idle worker goroutines. A nil *workers starts a
// goroutine per call.
type workers struct {
	idle    chan func()     // unbuffered: a send succeeds only to a worker that waits
	closing <-chan struct{} // the Client's: idle workers end at Close
	started atomic.Uint64   // workers started so far
}

func newWorkers(closing <-chan struct{}) *workers {
	return &workers{idle: make(chan func()), closing: closing}
}

// run runs f on an idle worker, or on a new one when none waits. f never
// waits for a worker to come free.
func (w *workers) run(f func()) {
	if w == nil {
		go f()
		return
	}
	select {
	case w.idle <- f:
	default:
		w.started.Add(1)
		go w.work(f)
	}
}

// work runs f, then the calls run hands it, until it has waited a whole
// workerIdle (between one and two of them) for one, or the Client closes.
// The timer is reset once per workerIdle, not per call: timers are what
// callers of a shared Client contend for.
func (w *workers) work(f func()) {
	f()
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	busy := false
	for {
		select {
		case f = <-w.idle:
			f()
			busy = true
		case <-w.closing:
			return
		case <-t.C:
			if !busy {
				return
			}
			busy = false
			t.Reset(workerIdle)
		}
	}
}
