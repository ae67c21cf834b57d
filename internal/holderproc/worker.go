package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/judge"
)

// worker is holderproc in the safety run: one relock Client in one process,
// taking one lock again and again and telling the judge what it believes.
type worker struct {
	addr, name string
	lease      time.Duration

	judge  string
	id     string
	kind   string
	hold   time.Duration
	wait   time.Duration
	n      int
	runFor time.Duration
}

// exclusive is what the worker needs of a lock type.
type exclusive interface {
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
	Token(ctx context.Context) (int64, error)
}

func (w *worker) open(c *relock.Client) (exclusive, error) {
	switch w.kind {
	case "lock":
		return c.Lock(w.name), nil
	case "fair":
		return c.FairLock(w.name), nil
	case "write":
		return c.RWLock(w.name).WriteLock(), nil
	}
	return nil, fmt.Errorf("unknown -kind %q (lock, fair or write)", w.kind)
}

// connect opens the process's Redis client and its relock Client, which
// logs warnings under the process's id (its pid unless -id names it).
func (w *worker) connect() (c *relock.Client, closeAll func()) {
	if w.id == "" {
		w.id = fmt.Sprintf("p%d", os.Getpid())
	}
	rdb := redis.NewClient(&redis.Options{Addr: w.addr})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c = relock.New(rdb, relock.WithWatchdogLease(w.lease), relock.WithLogger(logger.With("proc", w.id)))
	return c, func() { _ = c.Close(); _ = rdb.Close() }
}

// report dials the judge as id. The judge ends the run by saying "stop" (or
// going away), which ends stop: the hold in progress completes, no new one
// starts.
func (w *worker) report(id string) (rep *judge.Reporter, stop context.Context, closeAll func(), err error) {
	rep, err = judge.Dial(w.judge, id)
	if err != nil {
		return nil, nil, nil, err
	}
	stop, cancel := context.WithCancel(context.Background())
	go func() { rep.WaitStop(); cancel() }()
	return rep, stop, func() { cancel(); rep.Close() }, nil
}

// notObtained reports a failed TryLock or TryAcquire to the judge and, when
// Redis failed rather than the wait running out, pauses before the next try
// (Redis is down or restarting).
func notObtained(rep *judge.Reporter, err error) error {
	if err := rep.LockErr(time.Now(), err); err != nil {
		return err
	}
	if !errors.Is(err, relock.ErrNotObtained) {
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (w *worker) run() error {
	c, closeClient := w.connect()
	defer closeClient()
	l, err := w.open(c)
	if err != nil {
		return err
	}
	rep, stop, closeReport, err := w.report(w.id)
	if err != nil {
		return err
	}
	defer closeReport()
	var deadline time.Time
	if w.runFor > 0 {
		deadline = time.Now().Add(w.runFor)
	}

	holds := 0
	for (w.n == 0 || holds < w.n) && stop.Err() == nil {
		wait := w.wait
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			wait = min(wait, left)
		}
		hctx, err := w.tryLock(l, stop, wait)
		if err != nil {
			if stop.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline)) {
				break
			}
			if err := notObtained(rep, err); err != nil {
				return err
			}
			continue
		}
		holds++
		if err := w.critical(l, hctx, rep); err != nil {
			return err
		}
	}
	return rep.Done(time.Now(), holds)
}

// tryLock is TryLock whose wait stop can end, but whose hold it cannot: a
// hold's context ends only by the lock (or Unlock).
func (w *worker) tryLock(l exclusive, stop context.Context, wait time.Duration) (context.Context, error) {
	return stoppable(stop, func(ctx context.Context) (context.Context, error) { return l.TryLock(ctx, wait, 0) }, l.Unlock)
}

// stoppable runs take (a TryLock or TryAcquire) on a context that stop
// cancels while it waits but not once it has granted: the hold's context
// must end only by the lock. A grant that crossed stop is given back with
// release, unused.
func stoppable(stop context.Context, take func(context.Context) (context.Context, error), release func(context.Context) error) (context.Context, error) {
	parent, cancel := context.WithCancel(context.Background())
	stopWaiting := context.AfterFunc(stop, cancel)
	hctx, err := take(parent)
	if !stopWaiting() && err == nil {
		_ = release(hctx)
		return nil, fmt.Errorf("%w: stopped", relock.ErrNotObtained)
	}
	if err != nil {
		cancel()
	}
	return hctx, err
}

// critical is one hold: enter, work for w.hold unless the hold is lost
// meanwhile (then stop at once: that is the signal), exit, Unlock.
func (w *worker) critical(l exclusive, hctx context.Context, rep *judge.Reporter) error {
	tok, err := l.Token(hctx)
	if err != nil {
		// Granted, but the hold ended before it could be entered (a grant
		// whose reply came after its lease, during a server pause).
		if err := rep.Void(time.Now(), context.Cause(hctx)); err != nil {
			return err
		}
		if err := l.Unlock(hctx); err != nil {
			return rep.UnlockErr(0, time.Now(), err)
		}
		return nil
	}
	return holdFor(rep, tok, hctx, w.hold, l.Unlock)
}

// holdFor reports entering the hold hctx (token tok), works in it for d
// unless it is lost meanwhile (then it stops at once: that is the signal),
// reports the exit or the loss, and ends it with release.
func holdFor(rep *judge.Reporter, tok int64, hctx context.Context, d time.Duration, release func(context.Context) error) error {
	return holdForAs(rep, tok, "", hctx, d, release)
}

// holdForAs is holdFor for a hold that Redis records under owner ("": not
// reported).
func holdForAs(rep *judge.Reporter, tok int64, owner string, hctx context.Context, d time.Duration, release func(context.Context) error) error {
	if err := rep.EnterAs(tok, time.Now(), owner); err != nil {
		return err
	}
	timer := time.NewTimer(d)
	var err error
	select {
	case <-hctx.Done():
		timer.Stop()
		err = rep.Lost(tok, time.Now(), context.Cause(hctx))
	case <-timer.C:
		// The hold's context is the holder's only source of truth: if it
		// is still live now, this process believed it held the lock until
		// now.
		now := time.Now()
		if hctx.Err() != nil {
			err = rep.Lost(tok, now, context.Cause(hctx))
		} else {
			err = rep.Exit(tok, now)
		}
	}
	if err != nil {
		return err
	}
	if err := release(hctx); err != nil {
		return rep.UnlockErr(tok, time.Now(), err)
	}
	return nil
}
