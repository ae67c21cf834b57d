package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/judge"
)

// semaWorker is holderproc -kind sema in the safety run: one Client, and
// goroutines that each acquire 1 to take permits of a semaphore of permits,
// hold them for up to hold, and release them, again and again. Each
// goroutine reports to the judge under "<id>.g<i>", with the number of
// permits as the token of its enter, exit and lost events.
type semaWorker struct {
	*worker
	permits, goroutines, take int
}

func (w *semaWorker) run() error {
	c, closeClient := w.connect()
	defer closeClient()
	s := c.Semaphore(w.name, w.permits)
	var wg sync.WaitGroup
	errs := make([]error, w.goroutines)
	for g := range w.goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = w.loop(s, fmt.Sprintf("%s.g%d", w.id, g), uint64(g))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loop is one goroutine's run, until the judge says stop.
func (w *semaWorker) loop(s *relock.Semaphore, id string, seed uint64) error {
	rep, stop, closeReport, err := w.report(id)
	if err != nil {
		return err
	}
	defer closeReport()
	rnd := rand.New(rand.NewPCG(seed, uint64(os.Getpid())))
	holds := 0
	for stop.Err() == nil {
		n := 1 + rnd.IntN(w.take)
		hctx, err := w.acquire(s, stop, n)
		if err != nil {
			if stop.Err() != nil {
				break
			}
			if err := notObtained(rep, err); err != nil {
				return err
			}
			continue
		}
		holds++
		if err := w.critical(s, hctx, n, time.Duration(rnd.Int64N(int64(w.hold)))+time.Millisecond, rep); err != nil {
			return err
		}
	}
	return rep.Done(time.Now(), holds)
}

// acquire is TryAcquire whose wait stop can end, but whose hold it cannot
// (see worker.tryLock).
func (w *semaWorker) acquire(s *relock.Semaphore, stop context.Context, n int) (context.Context, error) {
	return stoppable(stop, func(ctx context.Context) (context.Context, error) { return s.TryAcquire(ctx, n, w.wait, 0) }, s.Release)
}

// critical is one hold of n permits, as worker.critical: enter, work for d
// unless the permits are lost meanwhile, exit, Release. A grant whose hold
// ended before it could be entered is reported as void.
func (w *semaWorker) critical(s *relock.Semaphore, hctx context.Context, n int, d time.Duration, rep *judge.Reporter) error {
	tok := int64(n)
	if hctx.Err() != nil {
		if err := rep.Void(time.Now(), context.Cause(hctx)); err != nil {
			return err
		}
		_ = s.Release(hctx)
		return nil
	}
	return holdFor(rep, tok, hctx, d, s.Release)
}

// holdPermits is holderproc -kind sema outside the safety run: it takes
// take permits and holds them until killed, printing "locked 0 <owner
// field>" once it holds them.
func holdPermits(c *relock.Client, name string, permits, take int) error {
	s := c.Semaphore(name, permits)
	ctx, err := s.Acquire(context.Background(), take)
	if err != nil {
		return err
	}
	id, _ := relock.OwnerOf(ctx)
	fmt.Printf("locked 0 %s:%s\n", c.ID(), id)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "holderproc: hold ended:", context.Cause(ctx))
	time.Sleep(time.Hour)
	return nil
}
