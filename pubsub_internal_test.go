package relock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
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
	a, err := s.join(ctx, ch, "", tried0)
	require.NoError(t, err)
	b, err := s.join(ctx, ch, "", tried0)
	require.NoError(t, err)
	var gotA, gotB bool // signalled consumes the signal: remember it
	require.Eventually(t, func() bool {
		gotA = gotA || signalled(a)
		gotB = gotB || signalled(b)
		return gotA && gotB
	}, 5*time.Second, time.Millisecond, "the subscription's confirmation makes every waiter re-check")
	tried := time.Now()
	a.rearm(tried)
	b.rearm(tried)

	t.Run("one message wakes one waiter, the one queued first", func(t *testing.T) {
		s.deliver(ch, wakeOne)
		assert.True(t, signalled(b), "b re-queued last at the head: it had the older turn")
		assert.False(t, signalled(a))
		b.rearm(time.Now())
	})
	t.Run("a woken waiter that leaves passes the wake-up on", func(t *testing.T) {
		s.deliver(ch, wakeOne)
		require.True(t, signalled(b))
		b.leave(false)
		assert.True(t, signalled(a), "the wake-up was not lost with b")
		a.rearm(time.Now())
	})
	t.Run("a wake-up with nobody queued waits for the next attempt", func(t *testing.T) {
		s.mu.Lock()
		s.wake(a) // a is "mid-attempt": popped and signalled
		s.mu.Unlock()
		require.True(t, signalled(a))
		tried := time.Now()
		s.deliver(ch, wakeOne) // arrives while a's attempt is out
		assert.False(t, signalled(a))
		a.rearm(tried)
		assert.True(t, signalled(a), "the unlock came after a's attempt started: a must retry")
	})
	t.Run("an older pending wake-up is not used twice", func(t *testing.T) {
		a.rearm(time.Now())
		assert.False(t, signalled(a))
	})
	t.Run("a broadcast wakes every waiter that was between attempts", func(t *testing.T) {
		// An RWLock's readers are all told at once ("all"); two of them
		// whose attempts went out before it and who re-queue after it must
		// both try again: one re-queuing must not use the broadcast up.
		s.mu.Lock()
		s.wake(a) // mid-attempt: popped and signalled
		s.mu.Unlock()
		require.True(t, signalled(a))
		c2, err := s.join(ctx, ch, "", time.Now())
		require.NoError(t, err)
		s.mu.Lock()
		s.wake(c2)
		s.mu.Unlock()
		require.True(t, signalled(c2))
		tried := time.Now()
		s.deliver(ch, wakeAll)
		a.rearm(tried)
		c2.rearm(tried)
		assert.True(t, signalled(a), "a tried before the broadcast")
		assert.True(t, signalled(c2), "c2 tried before the broadcast too: it must not sleep through it")
		late, err := s.join(ctx, ch, "", tried)
		require.NoError(t, err)
		assert.True(t, signalled(late), "a waiter joining after the broadcast, its attempt sent before, re-checks too")
		late.leave(false)
		c2.leave(false)
		a.rearm(time.Now())
		assert.False(t, signalled(a), "a broadcast older than the attempt wakes nobody")
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

// Waiters join and leave channels from many goroutines while the subscriber
// connection is killed now and then: subscribe and unsubscribe commands and
// their confirmations cross in flight, and connections are replaced with
// commands queued. Afterwards what the subscriber believes is what Redis
// has: every channel with waiters confirmed and subscribed once, no other
// channel subscribed.
func TestSubscriberStateMatchesRedis(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	s := c.subs
	ctx := context.Background()
	channels := []string{"relock:{m0}:ch", "relock:{m1}:ch", "relock:{m2}:ch", "relock:{m3}:ch"}

	var wg sync.WaitGroup
	kept := make([]*waiter, 8) // one waiter per goroutine stays at the end
	for g := range kept {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				w, err := s.join(ctx, channels[(g+i)%len(channels)], "", time.Now())
				if !assert.NoError(t, err) {
					return
				}
				if i == 149 && g%2 == 0 {
					kept[g] = w
					return
				}
				if i%3 == 0 {
					time.Sleep(time.Millisecond)
				}
				w.leave(false)
			}
		}()
	}
	for range 3 {
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	}
	wg.Wait()

	want := map[string]int64{}
	for _, w := range kept {
		if w != nil {
			want[w.st.name] = 1
		}
	}
	require.NotEmpty(t, want)
	require.Eventually(t, func() bool {
		n, err := admin.PubSubNumSub(ctx, channels...).Result()
		if err != nil {
			return false
		}
		for _, ch := range channels {
			if n[ch] != want[ch] {
				return false
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for ch := range want {
			if st := s.chans[ch]; st == nil || !st.confirmed {
				return false
			}
		}
		return len(s.chans) == len(want)
	}, 5*time.Second, 5*time.Millisecond, "the subscriber's channels and Redis's differ")
	for _, w := range kept {
		if w != nil {
			w.leave(false)
		}
	}
	require.Eventually(t, func() bool {
		n, err := admin.PubSubNumSub(ctx, channels...).Result()
		if err != nil {
			return false
		}
		for _, ch := range channels {
			if n[ch] != 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "a channel stayed subscribed after its last waiter left")
}
