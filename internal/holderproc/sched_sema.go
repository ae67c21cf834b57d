package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/judge"
	"github.com/relock-go/relock/internal/schedule"
)

// semaHandle is one Client's Semaphore A, rebuilt with the capacity Redis
// records when an Acquire finds another one (a SetPermits of another
// process): the processes of a schedule learn the new capacity as a
// deployment would, from where it is kept.
type semaHandle struct {
	c *relock.Client
	s atomic.Pointer[relock.Semaphore]
}

func newSemaHandle(c *relock.Client, permits int) *semaHandle {
	h := &semaHandle{c: c}
	h.s.Store(c.Semaphore(schedule.ResA, permits))
	return h
}

// adapt follows the capacity Redis records after an Acquire failed with
// ErrInvalidArgument.
func (h *semaHandle) adapt() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := h.s.Load().State(ctx)
	if err != nil {
		time.Sleep(20 * time.Millisecond) // Redis restarting, a link cut
		return
	}
	if st.Permits != h.s.Load().Permits() {
		h.s.Store(h.c.Semaphore(schedule.ResA, st.Permits))
	}
}

// acquire takes n permits (no more than the capacity) as one hold of a
// schedule: TryAcquire that stop ends while it waits. It returns the
// Semaphore that issued the hold and the permits taken.
func (h *semaHandle) acquire(stop context.Context, n int, lease time.Duration) (context.Context, *relock.Semaphore, int, error) {
	s := h.s.Load()
	n = min(n, s.Permits())
	hctx, err := stoppable(stop, func(ctx context.Context) (context.Context, error) {
		return s.TryAcquire(ctx, n, schedWait, lease)
	}, s.Release)
	if errors.Is(err, relock.ErrInvalidArgument) {
		h.adapt()
	}
	return hctx, s, n, err
}

// runSema plays a RoleSema or RoleCrowd process.
func (w *schedWorker) runSema(judgeAddr string) error {
	stop, cancel, timers := w.begin()
	defer cancel()
	main := newSemaHandle(w.clients[0], w.plan.Permits)
	for _, pc := range w.proc.SetPermits {
		timers = append(timers, time.AfterFunc(pc.At, func() { w.setPermits(main, pc.N) }))
	}
	defer func() { stopTimers(timers) }()
	var holds int
	var err error
	if w.proc.Role == schedule.RoleCrowd {
		holds, err = w.crowd(stop, judgeAddr)
	} else {
		holds, err = w.semaHolds(stop, w.rep, main, w.proc.Holds)
	}
	if err != nil {
		return err
	}
	if err := w.rep.Done(time.Now(), holds); err != nil {
		return err
	}
	<-stop.Done() // as run: background releases go on until the judge ends the run
	return nil
}

// semaHolds takes plan's holds one after the other, reporting to rep.
func (w *schedWorker) semaHolds(stop context.Context, rep *judge.Reporter, h *semaHandle, plan []schedule.Hold) (int, error) {
	holds := 0
	for holds < len(plan) && stop.Err() == nil && !w.closed.Load() {
		hd := plan[holds]
		if err := rep.Wait(time.Now()); err != nil {
			return holds, err
		}
		hctx, s, n, err := h.acquire(stop, hd.Permits, hd.Lease)
		if err != nil {
			if err := notObtained(rep, err); err != nil {
				return holds, err
			}
			continue
		}
		holds++
		if err := semaCritical(rep, s, ownerField(h.c, hctx), hctx, n, hd.Hold); err != nil {
			return holds, err
		}
		sleepCtx(stop, hd.Think)
	}
	return holds, nil
}

// ownerField is the owner field under which c records the holds of hctx.
func ownerField(c *relock.Client, hctx context.Context) string {
	id, ok := relock.OwnerOf(hctx)
	if !ok {
		return ""
	}
	return c.ID() + ":" + id
}

// semaCritical is one hold of n permits, reported with n as its token and
// with owner, the field Redis records it under.
func semaCritical(rep *judge.Reporter, s *relock.Semaphore, owner string, hctx context.Context, n int, d time.Duration) error {
	if hctx.Err() != nil {
		if err := rep.Void(time.Now(), context.Cause(hctx)); err != nil {
			return err
		}
		_ = s.Release(hctx)
		return nil
	}
	return holdForAs(rep, int64(n), owner, hctx, d, s.Release)
}

// crowd starts Crowd waiters at once, spread over CrowdClients Clients on
// server 0's connections (each its own relock Client, as separate processes
// would have), each reporting as "<id>.g<i>" and taking the plan's one hold.
func (w *schedWorker) crowd(stop context.Context, judgeAddr string) (int, error) {
	handles := []*semaHandle{newSemaHandle(w.clients[0], w.plan.Permits)}
	for range w.proc.CrowdClients - 1 {
		c := relock.New(w.rdbs[0], clientOptions(w.proc, w.logger)...)
		defer c.Close()
		handles = append(handles, newSemaHandle(c, w.plan.Permits))
	}
	var wg sync.WaitGroup
	var total atomic.Int64
	errs := make([]error, w.proc.Crowd)
	for g := range w.proc.Crowd {
		wg.Go(func() {
			rep, err := judge.Dial(judgeAddr, fmt.Sprintf("%s.g%d", w.proc.ID, g))
			if err != nil {
				errs[g] = err
				return
			}
			defer rep.Close()
			n, err := w.semaHolds(stop, rep, handles[g%len(handles)], w.proc.Holds)
			total.Add(int64(n))
			if err == nil {
				err = rep.Done(time.Now(), n)
			}
			errs[g] = err
		})
	}
	wg.Wait()
	return int(total.Load()), errors.Join(errs...)
}

// setPermits is the plan's SetPermits(n), reported with its outcome.
func (w *schedWorker) setPermits(h *semaHandle, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := h.s.Load().SetPermits(ctx, n)
	_ = w.rep.Call(judge.KindPermits, int64(n), start, fmt.Sprint(errText(err)))
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
