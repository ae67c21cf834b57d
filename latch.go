package relock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// CountDownLatch is a latch: TrySetCount closes it, CountDown to 0 opens it.
type CountDownLatch struct {
	base
	key, channel, mark string
}

// latchMarkTTL is how long, at least, a CountDownLatch's mark of an opening
// or a Delete lives in Redis (see CountDownLatch).
const latchMarkTTL = 2 * time.Minute

// latchRecheck bounds a latch waiter's sleep: well within latchMarkTTL, so
// that every waiter still finds the mark of an opening it missed.
const latchRecheck = 10 * time.Second

// CountDownLatch returns the latch called name, as Client.Lock does.
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	l := &CountDownLatch{}
	if l.init(c, name) {
		l.key, l.channel, l.mark = l.ks.key("latch"), l.ks.key("latch:ch"), l.ks.key("latch:past")
	}
	return l
}

// Key returns the Redis key of the latch.
func (l *CountDownLatch) Key() string { return l.key }

// TrySetCount closes an open latch with count n (1 to 2^30).
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int) (bool, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return false, err
	}
	if n < 1 || n > maxPermits {
		return false, fmt.Errorf("%w: a latch's count is 1 to %d, not %d", ErrInvalidArgument, maxPermits, n)
	}
	call := latchSetCall(l.key, l.mark, n, l.c.newOp())
	set, err := changeBounded(l.c, ctx, "latch set count", func() (int64, error) {
		return l.c.eval(context.WithoutCancel(ctx), "latch set count", call).Int64()
	})
	return set == 1, err
}

// CountDown takes one off the count of a closed latch.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	ctx, err := l.check(ctx)
	if err != nil {
		return err
	}
	call := latchCountDownCall(l.c, l.key, l.channel, l.mark, l.c.newOp())
	_, err = changeBounded(l.c, ctx, "latch count down", func() (struct{}, error) {
		return struct{}{}, l.c.eval(context.WithoutCancel(ctx), "latch count down", call).Err()
	})
	return err
}

// Count returns the count left (0: open, never set, or deleted).
func (l *CountDownLatch) Count(ctx context.Context) (int, error) {
	ctx, err := l.checkQuery(ctx)
	if err != nil {
		return 0, err
	}
	n, err := queryBounded(l.c, ctx, "latch count", func() (int, error) {
		return request(l.c, "latch count", func() (int, error) {
			v, err := hashWithLayout(context.WithoutCancel(ctx), l.c.rdb, l.key, "n")
			if v == nil || err != nil {
				return 0, err
			}
			return strconv.Atoi(v.(string))
		})
	})
	return n, err
}

// Delete removes a closed latch; its waiters fail with ErrNotObtained.
func (l *CountDownLatch) Delete(ctx context.Context) (bool, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return false, err
	}
	call := latchDeleteCall(l.c, l.key, l.channel, l.mark, l.c.newOp())
	n, err := changeBounded(l.c, ctx, "latch delete", func() (int64, error) {
		return l.c.eval(context.WithoutCancel(ctx), "latch delete", call).Int64()
	})
	return n == 1, err
}

// Wait returns nil once the latch is open, at once if it is not closed; it
// fails as an acquire does, or with ErrLockLost (docs/kinds.md: when).
func (l *CountDownLatch) Wait(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	if err := l.c.usable(); err != nil {
		return err
	}
	if err := checkLockArgs(ctx, WaitForever, 0); err != nil {
		return err
	}
	w := &latchWaiter{l: l}
	start := l.c.observedNow()
	a, slept, err := l.c.wait(ctx, waitSpec{wait: WaitForever, obs: l}, func() (attempt, error) { return w.try(ctx) })
	switch {
	case err != nil:
		err = waitFailed(err)
	case a.outcome != acquired:
		err = fmt.Errorf("relock: unexpected latch outcome %d", a.outcome)
	default:
		err = w.verdict
	}
	if slept > 0 {
		l.c.emitWait(ctx, l, "", start, 1, err)
	}
	return err
}

// waitFailed makes the error of a wait that failed wrap ErrNotObtained,
// Close's end of it included, unless it was the caller's mistake.
func waitFailed(err error) error {
	if errors.Is(err, ErrNotObtained) || errors.Is(err, ErrInvalidArgument) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotObtained, err)
}

// A latchWaiter is one Wait: the generation of the latch it saw closed
// ("" until it has), and, once an attempt ends the wait, how it ends.
type latchWaiter struct {
	l       *CountDownLatch
	seen    string
	verdict error
}

// try is one attempt of the wait, bounded by ctx: busy while the latch it
// saw closed (or the first it finds closed) still is; else the wait ends
// (outcome acquired), with verdict saying how.
func (w *latchWaiter) try(ctx context.Context) (attempt, error) {
	l := w.l
	call := latchStateCall(l.key, l.mark, w.seen)
	res, err := queryBounded(w.l.c, ctx, "latch wait", func() ([]any, error) {
		return l.c.eval(context.WithoutCancel(ctx), "latch wait", call).Slice()
	})
	if err != nil {
		return attempt{}, err
	}
	n, gen, passed, err := parseLatchState(res)
	if err != nil {
		return attempt{}, err
	}
	if n > 0 && (w.seen == "" || gen == w.seen) {
		w.seen = gen
		return attempt{outcome: busy, retryIn: latchRecheck, channel: l.channel}, nil
	}
	w.verdict = w.passed(passed)
	return attempt{outcome: acquired}, nil
}

// passed is how a wait ends once the latch it saw closed is gone (or
// another took its place), given what its mark says of it.
func (w *latchWaiter) passed(mark string) error {
	switch {
	case w.seen == "" || mark == "o":
		return nil
	case mark == "x":
		return fmt.Errorf("%w: latch %q was deleted before it opened", ErrNotObtained, w.l.ks.name)
	}
	return fmt.Errorf("%w: %w: latch %q is gone from Redis without having been opened (Redis lost it: a restart without its data, or a failover to a replica that missed it)",
		ErrNotObtained, ErrLockLost, w.l.ks.name)
}

// parseLatchState reads latch_state's reply.
func parseLatchState(res []any) (n int64, gen, passed string, err error) {
	if len(res) == 3 {
		var ok1, ok2, ok3 bool
		n, ok1 = res[0].(int64)
		gen, ok2 = res[1].(string)
		passed, ok3 = res[2].(string)
		if ok1 && ok2 && ok3 {
			return n, gen, passed, nil
		}
	}
	return 0, "", "", fmt.Errorf("relock: latch state script returned %v, want {count, generation, passed}", res)
}

// info makes a latch observed: its waits are reported as a lock's are.
func (l *CountDownLatch) info() LockInfo {
	return LockInfo{Name: l.ks.name, Kind: KindCountDownLatch}
}

// The latch's scripts (see scripts.go for the conventions).
var (
	latchSetScript       = newScript("latch_set")
	latchCountDownScript = newScript("latch_count_down")
	latchDeleteScript    = newScript("latch_delete")
	latchStateScript     = newScript("latch_state")
)

// latchSetCall closes the latch with count n, as generation op.
func latchSetCall(key, mark string, n int, op string) scriptCall {
	return scriptCall{script: latchSetScript, keys: []string{key, mark}, args: []any{n, op, latchMarkTTL.Milliseconds()}}
}

// latchCountDownCall takes one off the count (request op).
func latchCountDownCall(c *Client, key, channel, mark, op string) scriptCall {
	return scriptCall{script: latchCountDownScript, keys: []string{key, channel, mark}, args: []any{op, c.args.publish, latchMarkTTL.Milliseconds()}}
}

// latchDeleteCall removes a closed latch (request op).
func latchDeleteCall(c *Client, key, channel, mark, op string) scriptCall {
	return scriptCall{script: latchDeleteScript, keys: []string{key, channel, mark}, args: []any{op, c.args.publish, latchMarkTTL.Milliseconds()}}
}

// latchStateCall reads {count, generation, what became of seen}.
func latchStateCall(key, mark, seen string) scriptCall {
	return scriptCall{script: latchStateScript, keys: []string{key, mark}, args: []any{seen, latchMarkTTL.Milliseconds()}}
}
