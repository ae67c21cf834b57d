package relock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// CountDownLatch is a latch shared by every process that uses the same name
// on the same Redis, like Redisson's RCountDownLatch: TrySetCount closes it
// with a count, each CountDown takes one off, and Wait returns once the
// count reaches 0.
//
// Wait sleeps on the latch's channel through the Client's shared subscriber
// (the one wait loop of every lock type): the CountDown that opens the latch
// tells every waiter at once, and each returns after one read of the count.
// A waiter re-checks when its subscription is (re)confirmed — so a
// CountDown missed during a reconnection is not missed — and at least every
// watchdog lease otherwise; it never polls faster.
//
// Keys: "<prefix>:{name}:latch" (the count, and the op id of every
// CountDown applied, so that go-redis resending one never counts twice)
// exists while the latch is closed, with no TTL: a latch waits for its
// count, however long (Redisson's does too); the CountDown that opens it
// deletes it, so an open latch leaves nothing. A latch that will never open
// (its counters died) is removed by Delete. Its channel, ":latch:ch", shares
// the name's hash tag: one Cluster slot.
//
// A latch is only as durable as Redis: one that restarts without its data
// (no persistence), or fails over to a replica that missed the TrySetCount,
// forgets the count, and the latch then reads as open — Wait returns. Use
// AOF with fsync where that matters. A CountDown resent by go-redis after
// the latch opened and was set again counts on the new latch: each op id is
// recorded only while its latch is closed.
type CountDownLatch struct {
	base
	key, channel string
}

// CountDownLatch returns the latch called name. It sends nothing to Redis.
// An invalid name does not panic: every method then fails with
// ErrInvalidArgument.
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	l := &CountDownLatch{}
	if l.init(c, name) {
		l.key, l.channel = l.ks.key("latch"), l.ks.key("latch:ch")
	}
	return l
}

// Key returns the Redis key of the latch.
func (l *CountDownLatch) Key() string { return l.key }

// TrySetCount closes the latch with count n (at least 1) and reports true,
// or reports false, changing nothing, when it is closed already.
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int) (bool, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return false, err
	}
	if n < 1 || n > maxPermits {
		return false, fmt.Errorf("%w: a latch's count is 1 to %d, not %d", ErrInvalidArgument, maxPermits, n)
	}
	set, err := l.c.eval(ctx, "latch set count", scriptCall{script: latchSetScript, keys: []string{l.key}, args: []any{n}}).Int64()
	if err != nil {
		return false, err
	}
	return set == 1, nil
}

// CountDown takes one off the count; the one that reaches 0 opens the latch
// and wakes every waiter. On an open latch it does nothing. It is
// replay-safe: a request resent by go-redis counts once.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	ctx, err := l.check(ctx)
	if err != nil {
		return err
	}
	call := scriptCall{script: latchCountDownScript, keys: []string{l.key, l.channel}, args: []any{l.c.newOp(), l.c.args.publish}}
	return l.c.eval(context.WithoutCancel(ctx), "latch count down", call).Err()
}

// Count returns the count left (0: open).
func (l *CountDownLatch) Count(ctx context.Context) (int, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return 0, err
	}
	n, err := request(l.c, "latch count", l.c.rdb.HGet(ctx, l.key, "n").Int)
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Delete removes the latch, opening it for nobody: waiters go on waiting
// until a TrySetCount and its CountDowns open it, or their ctx ends. It
// reports whether the latch was closed.
func (l *CountDownLatch) Delete(ctx context.Context) (bool, error) {
	ctx, err := l.check(ctx)
	if err != nil {
		return false, err
	}
	n, err := request(l.c, "latch delete", l.c.rdb.Del(ctx, l.key).Result)
	return n == 1, err
}

// Wait blocks until the latch is open (its count is 0, or it was never
// set) or ctx ends; then it returns an error wrapping ErrNotObtained and
// ctx's cause.
func (l *CountDownLatch) Wait(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	if err := checkLockArgs(ctx, WaitForever, 0); err != nil {
		return err
	}
	dctx := context.WithoutCancel(ctx) // as every attempt of the wait loop
	try := func() (attempt, error) {
		n, err := l.Count(dctx)
		if err != nil || n == 0 {
			return attempt{outcome: acquired}, err
		}
		return attempt{outcome: busy, retryIn: -1, channel: l.channel}, nil
	}
	start := l.c.observedNow()
	a, slept, err := l.c.wait(ctx, waitSpec{wait: WaitForever, obs: l}, try)
	if slept > 0 {
		l.c.emitWait(ctx, l, start, 1, err)
	}
	if err == nil && a.outcome != acquired {
		err = fmt.Errorf("relock: unexpected latch outcome %d", a.outcome)
	}
	return err
}

// info makes a latch observed: its waits are reported as a lock's are.
func (l *CountDownLatch) info() LockInfo {
	return LockInfo{Name: l.ks.name, Kind: KindCountDownLatch}
}

// The latch's scripts (see scripts.go for the conventions).
var (
	latchSetScript       = newScript("latch_set")
	latchCountDownScript = newScript("latch_count_down")
)
