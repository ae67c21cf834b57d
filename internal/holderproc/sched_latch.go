package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/judge"
	"github.com/relock-go/relock/internal/schedule"
)

// latchCall bounds one TrySetCount, CountDown or Delete.
const latchCall = 2 * time.Second

// runLatch plays a RoleLatch process: each of its latch calls at its time,
// each in a goroutine of its own (a Wait goes on while the process counts
// down other rounds), reported to the judge.
func (w *schedWorker) runLatch() error {
	stop, cancel, timers := w.begin()
	defer cancel()
	defer func() { stopTimers(timers) }()
	var wg sync.WaitGroup
	for _, op := range w.proc.Latch {
		wg.Go(func() {
			sleepCtx(stop, time.Until(w.start.Add(op.At)))
			if stop.Err() == nil && !w.closed.Load() {
				w.latchOp(stop, op)
			}
		})
	}
	wg.Wait()
	if err := w.rep.Done(time.Now(), len(w.proc.Latch)); err != nil {
		return err
	}
	<-stop.Done()
	return nil
}

func (w *schedWorker) latchOp(stop context.Context, op schedule.LatchOp) {
	l := w.clients[0].CountDownLatch(schedule.LatchName(op.Round))
	round := int64(op.Round)
	switch op.Op {
	case schedule.LatchSet:
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), latchCall)
		set, err := l.TrySetCount(ctx, w.plan.Rounds[op.Round].Count)
		cancel()
		_ = w.rep.Call(judge.KindLatchSet, round, start, fmt.Sprintf("set=%v %s", set, errText(err)))
		// A latch whose CountDowns were lost (a restored snapshot) would
		// stay closed: its setter deletes it when the round is over.
		sleepCtx(stop, time.Until(start.Add(schedule.RoundLife)))
		w.latchRetry(judge.KindLatchDelete, round, func(ctx context.Context) (string, error) {
			closed, err := l.Delete(ctx)
			return fmt.Sprintf("closed=%v", closed), err
		})
	case schedule.LatchCount:
		w.latchRetry(judge.KindLatchCount, round, func(ctx context.Context) (string, error) {
			return "", l.CountDown(ctx)
		})
	case schedule.LatchWait:
		_ = w.rep.Report(judge.KindLatchWait, round, time.Now(), "")
		ctx, cancel := context.WithTimeout(stop, schedWait)
		err := l.Wait(ctx)
		cancel()
		_ = w.rep.Report(judge.KindLatchOpen, round, time.Now(), errText(err))
	}
}

// latchRetry runs call, and once more after a failure (a link cut):
// each run is reported, as a call that may have been applied.
func (w *schedWorker) latchRetry(kind string, round int64, call func(context.Context) (string, error)) {
	for try := 0; try < 2; try++ {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), latchCall)
		res, err := call(ctx)
		cancel()
		_ = w.rep.Call(kind, round, start, res+" "+errText(err))
		if err == nil || errors.Is(err, relock.ErrInvalidArgument) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
