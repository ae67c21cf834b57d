package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/judge"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/schedule"
)

// schedWorker is holderproc in the fault-schedule run: it plays one process
// of a schedule.Plan — its holds with their leases, and the faults the plan
// puts on its own connections — and reports to the judge.
type schedWorker struct {
	plan    *schedule.Plan
	proc    *schedule.Proc
	rdbs    []redis.UniversalClient // one per server, or the Cluster's
	logger  *slog.Logger
	rep     *judge.Reporter
	clients []*relock.Client
	faults  []*redistest.ConnFaults
	cutters []*evalshaCounter
	lock    held
	read    held // a writer's read side, for a nested read hold (schedule.Nest)
	force   func(context.Context) (bool, error)
	closed  atomic.Bool
	// aimRollback: the plan's cut-after-busy is due; the next TryLock with
	// the watchdog's lease (a leak of a short lease ends within the bound)
	// carries a firstAttempt, until one cut has been armed.
	aimRollback atomic.Bool
	start       time.Time
}

// held is what the worker needs of every lock type; token is 0 where the
// type has none (ReadLock, MultiLock).
type held struct {
	tryLock func(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	unlock  func(ctx context.Context) error
	token   func(ctx context.Context) (int64, error)
}

// schedWait bounds one TryLock: longer than any run, so that a waiter
// stranded while the lock is free shows as such instead of giving up.
const schedWait = 60 * time.Second

func runSchedule(planJSON, id, judgeAddr, addrs string) error {
	plan, err := schedule.Decode(planJSON)
	if err != nil {
		return err
	}
	proc := plan.Proc(id)
	if proc == nil {
		return fmt.Errorf("no process %q in the plan", id)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("proc", id)
	w := &schedWorker{plan: plan, proc: proc, logger: logger}
	defer w.connect(strings.Split(addrs, ","))()
	if len(w.cutters) == 2 {
		w.cutters[1].rollbackCut = w.cutters[0]
	}
	if err := w.open(); err != nil {
		return err
	}
	if w.rep, err = judge.Dial(judgeAddr, id); err != nil {
		return err
	}
	defer w.rep.Close()
	switch proc.Role {
	case schedule.RoleSema, schedule.RoleCrowd:
		return w.runSema(judgeAddr)
	case schedule.RoleLatch:
		return w.runLatch()
	case schedule.RoleDeadlock:
		return w.runDeadlock()
	}
	return w.run()
}

// connect makes the process's Clients, one per server of addrs, each with
// its connection faults; or, on a Cluster, one Client over its nodes and no
// connection faults (the plan's faults are the Cluster's reshards). It
// returns what closes them.
func (w *schedWorker) connect(addrs []string) (closeAll func()) {
	if w.plan.Cluster {
		rdb := redis.NewClusterClient(clusterOptions(addrs, w.proc.Client))
		c := relock.New(rdb, clientOptions(w.proc, w.logger)...)
		w.clients, w.rdbs = append(w.clients, c), append(w.rdbs, rdb)
		return func() { _ = c.Close(); _ = rdb.Close() }
	}
	var closers []func() error
	for _, addr := range addrs {
		rdb := redis.NewClient(redisOptions(addr, w.proc.Client))
		f, counter := redistest.NewConnFaults(), &evalshaCounter{}
		counter.faults = f
		rdb.AddHook(f)
		rdb.AddHook(counter)
		c := relock.New(rdb, clientOptions(w.proc, w.logger)...)
		w.clients, w.faults, w.cutters = append(w.clients, c), append(w.faults, f), append(w.cutters, counter)
		w.rdbs = append(w.rdbs, rdb)
		closers = append(closers, rdb.Close, c.Close)
	}
	return func() {
		for i := len(closers) - 1; i >= 0; i-- { // each Client before its go-redis client
			_ = closers[i]()
		}
	}
}

// open builds the lock of the process's role.
func (w *schedWorker) open() error {
	c0 := w.clients[0]
	switch w.proc.Role {
	case schedule.RoleLock:
		l := c0.Lock(schedule.ResA)
		w.lock, w.force = held{l.TryLock, l.Unlock, l.Token}, l.ForceUnlock
	case schedule.RoleFair:
		l := c0.FairLock(schedule.ResA)
		w.lock, w.force = held{l.TryLock, l.Unlock, l.Token}, l.ForceUnlock
	case schedule.RoleWrite:
		l := c0.RWLock(schedule.ResA).WriteLock()
		w.lock, w.force = held{l.TryLock, l.Unlock, l.Token}, l.ForceUnlock
		r := c0.RWLock(schedule.ResA).ReadLock()
		w.read = held{r.TryLock, r.Unlock, nil}
	case schedule.RoleRead:
		l := c0.RWLock(schedule.ResA).ReadLock()
		w.lock, w.force = held{l.TryLock, l.Unlock, nil}, l.ForceUnlock
	case schedule.RoleMulti, schedule.RolePart:
		if len(w.clients) < 2 {
			return fmt.Errorf("role %s needs two servers in -addr", w.proc.Role)
		}
		b := w.clients[1].Lock(schedule.ResB)
		w.lock, w.force = held{b.TryLock, b.Unlock, b.Token}, b.ForceUnlock
		if w.proc.Role == schedule.RoleMulti {
			m := relock.NewMultiLock(c0.Lock(schedule.ResA), b)
			w.lock = held{m.TryLock, m.Unlock, nil}
		}
	case schedule.RoleSema, schedule.RoleCrowd, schedule.RoleLatch, schedule.RoleDeadlock:
		// runSema, runLatch and runDeadlock build their own.
	default:
		return fmt.Errorf("unknown role %q", w.proc.Role)
	}
	return nil
}

// begin starts a process's part of the plan: stop ends when the judge says
// stop (or cancel is called), the clock starts, and the faults' timers are
// armed.
func (w *schedWorker) begin() (stop context.Context, cancel context.CancelFunc, timers []*time.Timer) {
	stop, cancel = context.WithCancel(context.Background())
	go func() { w.rep.WaitStop(); cancel() }()
	w.start = time.Now()
	return stop, cancel, w.armFaults(cancel)
}

func stopTimers(timers []*time.Timer) {
	for _, t := range timers {
		t.Stop()
	}
}

// run plays the holds until they are done, the judge says stop, or the
// plan closes the Client.
func (w *schedWorker) run() error {
	stop, cancel, timers := w.begin()
	defer cancel()
	defer func() { stopTimers(timers) }()
	holds := 0
	for holds < len(w.proc.Holds) && stop.Err() == nil && !w.closed.Load() {
		h := w.proc.Holds[holds]
		if err := w.rep.Wait(time.Now()); err != nil {
			return err
		}
		mark := w.aim(h.Lease)
		hctx, err := w.tryLock(stop, h.Lease, mark)
		if mark != nil && mark.fired.Load() {
			w.aimRollback.Store(false) // the cut was placed
		}
		if err != nil {
			if err := w.rep.LockErr(time.Now(), err); err != nil {
				return err
			}
			if !errors.Is(err, relock.ErrNotObtained) {
				time.Sleep(20 * time.Millisecond) // Redis restarting, a link cut
			}
			continue
		}
		holds++
		if err := w.critical(hctx, h); err != nil {
			return err
		}
		sleepCtx(stop, h.Think)
	}
	if err := w.rep.Done(time.Now(), holds); err != nil {
		return err
	}
	// The Client stays open until the judge ends the run: a release that
	// failed is still being retried in the background, and Close would
	// abandon it.
	<-stop.Done()
	return nil
}

// aim returns the mark of the plan's cut on a MultiLock rollback (see
// firstAttempt) for a TryLock while that cut is due, on a hold with the
// watchdog's lease; nil for none.
func (w *schedWorker) aim(lease time.Duration) *firstAttempt {
	if !w.aimRollback.Load() || lease != 0 {
		return nil
	}
	return &firstAttempt{}
}

// tryLock is TryLock that the judge's stop ends while it waits, but whose
// hold it cannot end (as worker.tryLock).
func (w *schedWorker) tryLock(stop context.Context, lease time.Duration, mark *firstAttempt) (context.Context, error) {
	base := context.Background()
	if mark != nil {
		base = context.WithValue(base, firstAttemptKey{}, mark)
	}
	parent, cancel := context.WithCancel(base)
	stopWaiting := context.AfterFunc(stop, cancel)
	hctx, err := w.lock.tryLock(parent, schedWait, lease)
	if !stopWaiting() && err == nil {
		_ = w.lock.unlock(hctx)
		return nil, fmt.Errorf("%w: stopped", relock.ErrNotObtained)
	}
	if err != nil {
		cancel()
	}
	return hctx, err
}

// critical is one hold, reported as worker.critical reports it, with its
// nested hold when the plan gives it one.
func (w *schedWorker) critical(hctx context.Context, h schedule.Hold) error {
	tok, live := w.token(hctx)
	if !live {
		// Granted, but the hold ended before it could be entered.
		if err := w.rep.Void(time.Now(), context.Cause(hctx)); err != nil {
			return err
		}
		_ = w.lock.unlock(hctx)
		return nil
	}
	release := w.lock.unlock
	if h.Nest != nil {
		release = w.nest(hctx, *h.Nest)
	}
	return holdFor(w.rep, tok, hctx, h.Hold, release)
}

// nest takes the nested hold n inside the hold hctx (a re-entry, or a
// writer's read hold) and returns the release of both: the re-entry's
// before the hold's; a read hold's For after the write side's (the
// downgrade). A nested hold that fails (the hold lost meanwhile, a fault)
// is left out: the outer hold is what the run judges.
func (w *schedWorker) nest(hctx context.Context, n schedule.Nest) func(context.Context) error {
	inner := w.lock
	if n.Read && w.read.tryLock != nil {
		inner = w.read
	}
	ictx, err := inner.tryLock(hctx, 0, n.Lease)
	if err != nil {
		w.logger.Debug("nested hold not taken", "err", err)
		return w.lock.unlock
	}
	if !n.Read {
		return func(ctx context.Context) error {
			_ = inner.unlock(ictx)
			return w.lock.unlock(ctx)
		}
	}
	return func(ctx context.Context) error {
		err := w.lock.unlock(ctx)
		time.Sleep(n.For)
		_ = inner.unlock(ictx)
		return err
	}
}

// token is the hold's fencing token (0 for a type without one) and whether
// the hold is still live.
func (w *schedWorker) token(hctx context.Context) (int64, bool) {
	if w.lock.token == nil {
		return 0, hctx.Err() == nil
	}
	tok, err := w.lock.token(hctx)
	return tok, err == nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// redisOptions are the options of a go-redis client of addr made as the
// plan's setup says (schedule.Proc.Client).
func redisOptions(addr, setup string) *redis.Options {
	o := &redis.Options{Addr: addr}
	switch setup {
	case schedule.ClientContextTimeout:
		o.ContextTimeoutEnabled = true
	case schedule.ClientShortTimeouts:
		o.ReadTimeout, o.WriteTimeout = schedule.ShortTimeout, schedule.ShortTimeout
	}
	return o
}

// clusterOptions are redisOptions for a ClusterClient of the nodes addrs.
func clusterOptions(addrs []string, setup string) *redis.ClusterOptions {
	o := redisOptions("", setup)
	return &redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout}
}

func clientOptions(proc *schedule.Proc, logger *slog.Logger) []relock.Option {
	opts := []relock.Option{relock.WithLogger(logger)}
	if proc.Role == schedule.RoleSema || proc.Role == schedule.RoleCrowd {
		opts = append(opts, relock.WithWaiterTimeout(schedule.SemaWaiterTimeout))
	}
	return opts
}
