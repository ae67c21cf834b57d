package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/schedule"
)

// pairLock is one resource of a deadlock plan, taken on the watchdog's
// lease.
type pairLock struct {
	take    func(ctx context.Context, wait time.Duration) (context.Context, error)
	release func(ctx context.Context) error
}

// pairResource is the resource res of a deadlock plan on the process's
// Client.
func (w *schedWorker) pairResource(res string) pairLock {
	c := w.clients[0]
	if res == schedule.ResS {
		s := c.Semaphore(schedule.ResS, schedule.DeadlockPermits)
		return pairLock{func(ctx context.Context, wait time.Duration) (context.Context, error) {
			return s.TryAcquire(ctx, 1, wait, 0)
		}, s.Release}
	}
	l := c.Lock(res)
	return pairLock{func(ctx context.Context, wait time.Duration) (context.Context, error) {
		return l.TryLock(ctx, wait, 0)
	}, l.Unlock}
}

// runDeadlock plays a deadlock plan's holds: each takes its pair's first
// resource, then waits for the second while it keeps the first. A wait
// that ends without the second (detection chose it, or a fault) releases
// the first and takes the hold again.
func (w *schedWorker) runDeadlock() error {
	stop, cancel, timers := w.begin()
	defer cancel()
	defer func() { stopTimers(timers) }()
	holds := 0
	for holds < len(w.proc.Holds) && stop.Err() == nil {
		h := w.proc.Holds[holds]
		if err := w.rep.Wait(time.Now()); err != nil {
			return err
		}
		ok, err := w.pairHold(stop, h)
		if err != nil {
			return err
		}
		if !ok {
			sleepCtx(stop, 20*time.Millisecond) // a victim lets the others in
			continue
		}
		holds++
		sleepCtx(stop, h.Think)
	}
	if err := w.rep.Done(time.Now(), holds); err != nil {
		return err
	}
	<-stop.Done() // as run: failed releases are still retried
	return nil
}

// pairHold takes h's pair, stays inside for h.Hold and releases both; false
// when it did not get both.
func (w *schedWorker) pairHold(stop context.Context, h schedule.Hold) (bool, error) {
	first, second := w.pairResource(h.Pair[0]), w.pairResource(h.Pair[1])
	parent, cancelWait := context.WithCancel(relock.NewOwner(context.Background()))
	defer cancelWait()
	defer context.AfterFunc(stop, cancelWait)()
	h1, err := first.take(parent, schedWait)
	if err != nil {
		return false, w.rep.LockErr(time.Now(), err)
	}
	sleepCtx(h1, schedule.PairGap)
	start := time.Now()
	h2, err := second.take(h1, schedule.DeadlockWait)
	if err := w.rep.Call(schedule.CallDeadlockWait, 0, start, waitOutcome(err, time.Since(start))); err != nil {
		return false, err
	}
	if err != nil {
		_ = first.release(h1)
		return false, w.rep.LockErr(time.Now(), err)
	}
	release := func(context.Context) error {
		return errors.Join(second.release(h2), first.release(h1))
	}
	return true, holdForAs(w.rep, 0, strings.Join(schedule.Exclusive(h.Pair), ","), h2, h.Hold, release)
}

// waitOutcome is the outcome of a wait for a second resource, as
// schedule.CallDeadlockWait reports it.
func waitOutcome(err error, waited time.Duration) string {
	switch {
	case err == nil:
		return schedule.WaitGranted
	case errors.Is(err, relock.ErrDeadlock):
		return schedule.WaitVictim + " " + err.Error()
	case errors.Is(err, relock.ErrNotObtained) && waited >= schedule.DeadlockWait:
		return schedule.WaitBound + " " + err.Error()
	}
	return schedule.WaitFailed + " " + err.Error()
}
