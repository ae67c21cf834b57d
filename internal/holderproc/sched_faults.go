package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/schedule"
)

// armFaults starts a timer for every fault the plan puts on this process:
// its connection faults, its Close and its ForceUnlock. endRun ends the run
// (after Close).
func (w *schedWorker) armFaults(endRun func()) []*time.Timer {
	var timers []*time.Timer
	for _, f := range w.proc.Conn {
		timers = append(timers, time.AfterFunc(f.At, func() { w.connFault(f) }))
	}
	if w.proc.CloseAt > 0 {
		timers = append(timers, time.AfterFunc(w.proc.CloseAt, func() {
			w.closed.Store(true)
			_ = w.rep.Closed(time.Now())
			for _, c := range w.clients {
				_ = c.Close()
			}
			endRun()
		}))
	}
	if w.proc.ForceAt > 0 {
		timers = append(timers, time.AfterFunc(w.proc.ForceAt, w.forceUnlock))
	}
	return timers
}

func (w *schedWorker) connFault(f schedule.ConnFault) {
	if f.Server >= len(w.faults) {
		return
	}
	kind := redistest.CommandConn
	if f.Conn == "subscriber" {
		kind = redistest.SubscriberConn
	}
	faults := w.faults[f.Server]
	switch f.Op {
	case schedule.OpDelay:
		faults.SetDelay(kind, f.Delay)
		time.AfterFunc(f.For, func() { faults.SetDelay(kind, 0) })
	case schedule.OpCut:
		faults.Cut(kind)
	case schedule.OpCutBefore:
		w.cutters[f.Server].arm(f.Skip)
	case schedule.OpCutAfterBusy:
		if f.Server == 0 && len(w.cutters) == 2 {
			w.aimRollback.Store(true)
		}
	}
}

// forceUnlock is ForceUnlock from this process's own Client, beside its own
// wait or hold: the force release may hand the lock to this very Client.
func (w *schedWorker) forceUnlock() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	freed, err := w.force(ctx)
	_ = w.rep.Force(time.Now(), fmt.Sprintf("freed=%v err=%v", freed, err))
}

// evalshaCounter is a go-redis hook that cuts the command link just before
// the skip+1-th EVALSHA from the moment it is armed: a cut placed a few
// requests ahead lands on whatever comes then — an acquire, a MultiLock
// rollback, a release.
type evalshaCounter struct {
	faults *redistest.ConnFaults
	mu     sync.Mutex
	left   int  // EVALSHAs to let through before the cut
	armed  bool // a cut is pending
	// rollbackCut, on server 1's counter, is server 0's: armed to cut
	// before its next EVALSHA — the rollback of group A — when the B
	// acquire of a TryLock's first attempt answers busy.
	rollbackCut *evalshaCounter
}

// firstAttempt marks the context of a TryLock whose first attempt's
// rollback is aimed at (schedule.OpCutAfterBusy); over once that attempt's
// outcome is known. A MultiLock runs its scripts with the caller's context
// values.
type firstAttempt struct {
	over  atomic.Bool
	fired atomic.Bool // the cut was armed
}

type firstAttemptKey struct{}

// sawReply follows the first attempt of an aimed TryLock: a busy answer on
// server 0 (A) ends it; any answer on server 1 (B) ends it, and a busy one
// arms the cut on server 0 for the rollback that follows at once.
func (c *evalshaCounter) sawReply(ctx context.Context, cmd redis.Cmder) {
	fa, _ := ctx.Value(firstAttemptKey{}).(*firstAttempt)
	if fa == nil || fa.over.Load() || !strings.EqualFold(cmd.Name(), "evalsha") {
		return
	}
	busy := false
	if rc, ok := cmd.(*redis.Cmd); ok {
		res, err := rc.Int64Slice()
		busy = err == nil && len(res) == 3 && res[0] == 0 // {0, part, pttl}: a group's acquire found a part held
	}
	switch {
	case c.rollbackCut != nil:
		if fa.over.Swap(true) || !busy {
			return
		}
		fa.fired.Store(true)
		c.rollbackCut.arm(0)
	case busy:
		fa.over.Store(true)
	}
}

func (c *evalshaCounter) arm(skip int) {
	c.mu.Lock()
	c.left, c.armed = skip, true
	c.mu.Unlock()
}

// see counts one EVALSHA about to be sent and arms the cut for it when its
// turn has come.
func (c *evalshaCounter) see(name string) {
	if !strings.EqualFold(name, "evalsha") {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return
	}
	if c.left > 0 {
		c.left--
		return
	}
	c.armed = false
	c.faults.CutBefore(redistest.CommandConn, "EVALSHA", 1)
}

func (c *evalshaCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *evalshaCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.see(cmd.Name())
		err := next(ctx, cmd)
		if err == nil {
			c.sawReply(ctx, cmd)
		}
		return err
	}
}

func (c *evalshaCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			c.see(cmds[0].Name())
		}
		return next(ctx, cmds)
	}
}
