package relock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type namedLock string

func (n namedLock) info() LockInfo { return LockInfo{Name: string(n), Kind: KindLock} }

type waitCounts struct{ started, woken atomic.Int64 }

func waitClient(t *testing.T) (*Client, *waitCounts, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	n := &waitCounts{}
	c := New(rdb, WithObserver(&Observer{
		WaitStarted: func(context.Context, LockInfo) { n.started.Add(1) },
		Woken:       func(context.Context, LockInfo) { n.woken.Add(1) },
	}))
	t.Cleanup(func() { _ = c.Close() })
	return c, n, rdb
}

// A waiter that retries because its fallback timer (the holder's lease) ran
// out was not woken: no Woken, however many times it slept.
func TestWokenNotOnFallbackTimer(t *testing.T) {
	c, n, _ := waitClient(t)
	tries := 0
	try := func() (attempt, error) {
		if tries++; tries < 4 {
			return attempt{outcome: busy, retryIn: 5 * time.Millisecond}, nil // no channel: the timer only
		}
		return attempt{outcome: acquired}, nil
	}
	a, slept, err := c.wait(context.Background(), waitSpec{wait: WaitForever, obs: namedLock("t")}, try)
	require.NoError(t, err)
	assert.Equal(t, acquired, a.outcome)
	assert.Equal(t, 3, slept)
	assert.Equal(t, int64(1), n.started.Load(), "WaitStarted once")
	assert.Zero(t, n.woken.Load(), "no Woken for a timer")
}

// A waiter whose every retry came from a wake-up on the lock's channel (the
// holder's lease is far off) reports a Woken for each.
func TestWokenOnEveryWakeUp(t *testing.T) {
	c, n, rdb := waitClient(t)
	const ch = "relock-test:wake"
	tries := 0
	try := func() (attempt, error) {
		if tries++; tries < 3 {
			return attempt{outcome: busy, retryIn: time.Hour, channel: ch}, nil
		}
		return attempt{outcome: acquired}, nil
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// Unlock announcements until the waiter has the lock.
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				_ = rdb.Publish(context.Background(), ch, "1").Err()
			}
		}
	}()
	a, slept, err := c.wait(context.Background(), waitSpec{wait: WaitForever, obs: namedLock("w")}, try)
	require.NoError(t, err)
	assert.Equal(t, acquired, a.outcome)
	assert.Equal(t, int64(1), n.started.Load())
	assert.Equal(t, int64(slept), n.woken.Load(), "every sleep ended by a wake-up")
	assert.Equal(t, 2, slept)
}

// A wait given no lock to report (s nil) reports nothing.
func TestWaitWithoutObservedReportsNothing(t *testing.T) {
	c, n, _ := waitClient(t)
	tries := 0
	try := func() (attempt, error) {
		if tries++; tries < 2 {
			return attempt{outcome: busy, retryIn: time.Millisecond}, nil
		}
		return attempt{outcome: acquired}, nil
	}
	_, _, err := c.wait(context.Background(), waitSpec{wait: WaitForever, obs: nil}, try)
	require.NoError(t, err)
	assert.Zero(t, n.started.Load())
}

// BenchmarkObserverEmit is what the library adds to one uncontended
// Lock+Unlock for its Observer, without Redis: the start clock read, the
// Acquired and the final Released event, with every hook a cheap func (set)
// or no Observer (unset). Set against BenchmarkObserver's unset Lock+Unlock,
// it is the overhead free of the network's noise.
func BenchmarkObserverEmit(b *testing.B) {
	var n atomic.Int64
	cheap := &Observer{
		Acquired: func(context.Context, AcquiredEvent) { n.Add(1) },
		Released: func(context.Context, ReleasedEvent) { n.Add(1) },
	}
	for _, tc := range []struct {
		name string
		obs  *Observer
	}{{"unset", nil}, {"set", cheap}} {
		b.Run(tc.name, func(b *testing.B) {
			c := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), WithObserver(tc.obs))
			defer c.Close()
			l := c.Lock("bench")
			h := &hold{scheme: lockScheme{l}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				start := c.observedNow()
				c.emitAcquired(ctx, h, start, 1, false, false)
				h.told.Store(false) // a new generation, as grant does
				c.emitReleased(ctx, h, start, true, nil)
			}
		})
	}
}
