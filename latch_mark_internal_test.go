package relock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// latchMarkBytesBudget is what a CountDownLatch's mark may cost Redis per
// opening it remembers (MEMORY USAGE of the mark key, its own overhead
// included).
const latchMarkBytesBudget = 20

// latchOpenings opens and closes one CountDownLatch through its scripts,
// without the wait loop, with a mark lifetime of its own.
type latchOpenings struct {
	t   *testing.T
	c   *Client
	l   *CountDownLatch
	rdb *redis.Client
	ttl time.Duration
}

func newLatchOpenings(t *testing.T, ttl time.Duration) latchOpenings {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	return latchOpenings{t: t, c: c, l: c.CountDownLatch("marks"), rdb: rdb, ttl: ttl}
}

// withTTL is call with the mark lifetime lo.ttl as its argument after the
// first n.
func (lo latchOpenings) withTTL(call scriptCall, n int) scriptCall {
	call.args = append(call.args[:n:n], lo.ttl.Milliseconds())
	return call
}

// open closes the latch with count 1 and counts it down; it returns the
// generation it opened.
func (lo latchOpenings) open() string {
	ctx := context.Background()
	gen := lo.c.newOp()
	set, err := lo.c.eval(ctx, "set", lo.withTTL(latchSetCall(lo.l.key, lo.l.mark, 1, gen), 2)).Int64()
	require.NoError(lo.t, err)
	require.Equal(lo.t, int64(1), set)
	left, err := lo.c.eval(ctx, "count down", lo.withTTL(latchCountDownCall(lo.c, lo.l.key, lo.l.channel, lo.l.mark, lo.c.newOp()), 2)).Int64()
	require.NoError(lo.t, err)
	require.Zero(lo.t, left)
	return gen
}

// passed is what a waiter that saw gen closed reads of it: "o" opened, ""
// nothing known.
func (lo latchOpenings) passed(gen string) string {
	res, err := lo.c.eval(context.Background(), "state", lo.withTTL(latchStateCall(lo.l.key, lo.l.mark, gen), 1)).Slice()
	require.NoError(lo.t, err)
	require.Len(lo.t, res, 3)
	return res[2].(string)
}

// A CountDownLatch's mark costs a few bytes per opening it remembers, and
// a waiter still reads the first of many openings as opened.
func TestCountDownLatchMarkMemoryPerOpening(t *testing.T) {
	const openings = 2000
	lo := newLatchOpenings(t, latchMarkTTL)
	first := lo.open()
	for range openings - 1 {
		lo.open()
	}
	assert.Equal(t, "o", lo.passed(first), "the first of %d openings is remembered", openings)
	assert.Empty(t, lo.passed(lo.c.newOp()), "a generation never set is not")
	bytes, err := lo.rdb.MemoryUsage(context.Background(), lo.l.mark, 0).Result()
	require.NoError(t, err)
	per := float64(bytes) / openings
	t.Logf("the mark of %d openings: %d B, %.1f B each", openings, bytes, per)
	assert.LessOrEqual(t, per, float64(latchMarkBytesBudget))
}

// A CountDownLatch's mark keeps an opening at least its lifetime and
// forgets it a slot after, while openings go on; the key goes a lifetime
// after its last opening.
func TestCountDownLatchMarkIsBoundedByTime(t *testing.T) {
	const ttl = 1600 * time.Millisecond // slots of 50 ms
	lo := newLatchOpenings(t, ttl)
	early := lo.open()
	opened := time.Now()
	for time.Since(opened) < ttl-100*time.Millisecond {
		lo.open()
		time.Sleep(5 * time.Millisecond) // a rate, not a wait for a signal
	}
	assert.Equal(t, "o", lo.passed(early), "an opening 100 ms before the lifetime's end is remembered")
	for time.Since(opened) < ttl+ttl/semaLatchSlots+100*time.Millisecond {
		lo.open()
		time.Sleep(5 * time.Millisecond)
	}
	assert.Empty(t, lo.passed(early), "an opening a slot past the lifetime is forgotten")
	last := time.Now()
	pttl := lo.rdb.PTTL(context.Background(), lo.l.mark).Val()
	assert.LessOrEqual(t, pttl, ttl)
	require.Eventually(t, func() bool { return lo.rdb.Exists(context.Background(), lo.l.mark).Val() == 0 },
		ttl+time.Second, 10*time.Millisecond, "the mark goes a lifetime after its last opening")
	assert.GreaterOrEqual(t, time.Since(last), ttl-50*time.Millisecond, "the mark lived a lifetime after the last opening")
}
