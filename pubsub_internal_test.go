package relock

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func signalled(w *waiter) bool {
	select {
	case <-w.sig:
		return true
	default:
		return false
	}
}

// The wake-up bookkeeping of the subscriber, driven directly.
func TestSubscriberWakeUps(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
	s := c.subs
	ctx := context.Background()
	const ch = "relock:{unit}:ch"

	// Both waiters tried before joining: the confirmation, whether it comes
	// before b joins or after, is news to both.
	tried0 := time.Now()
	a, err := s.join(ctx, ch, tried0, time.Now())
	require.NoError(t, err)
	b, err := s.join(ctx, ch, tried0, time.Now())
	require.NoError(t, err)
	var gotA, gotB bool // signalled consumes the signal: remember it
	require.Eventually(t, func() bool {
		gotA = gotA || signalled(a)
		gotB = gotB || signalled(b)
		return gotA && gotB
	}, 5*time.Second, time.Millisecond, "the subscription's confirmation makes every waiter re-check")
	tried := time.Now()
	a.rearm(tried, time.Now())
	b.rearm(tried, time.Now())

	t.Run("one message wakes one waiter, the one queued first", func(t *testing.T) {
		s.deliver(ch, wakeOne)
		assert.True(t, signalled(b), "b re-queued last at the head: it had the older turn")
		assert.False(t, signalled(a))
		b.rearm(time.Now(), time.Now())
	})
	t.Run("a woken waiter that leaves passes the wake-up on", func(t *testing.T) {
		s.deliver(ch, wakeOne)
		require.True(t, signalled(b))
		b.leave(false)
		assert.True(t, signalled(a), "the wake-up was not lost with b")
		a.rearm(time.Now(), time.Now())
	})
	t.Run("a wake-up with nobody queued waits for the next attempt", func(t *testing.T) {
		s.mu.Lock()
		s.wake(a) // a is "mid-attempt": popped and signalled
		s.mu.Unlock()
		require.True(t, signalled(a))
		tried := time.Now()
		s.deliver(ch, wakeOne) // arrives while a's attempt is out
		assert.False(t, signalled(a))
		a.rearm(tried, time.Now())
		assert.True(t, signalled(a), "the unlock came after a's attempt started: a must retry")
	})
	t.Run("an older pending wake-up is not used twice", func(t *testing.T) {
		a.rearm(time.Now(), time.Now())
		assert.False(t, signalled(a))
	})
	t.Run("the last waiter to leave unsubscribes", func(t *testing.T) {
		a.leave(false)
		assert.Equal(t, 0, s.channels())
		require.Eventually(t, func() bool {
			n, err := rdb.PubSubNumSub(ctx, ch).Result()
			return err == nil && n[ch] == 0
		}, 5*time.Second, time.Millisecond)
	})
}
