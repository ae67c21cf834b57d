package relock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// clientSetups are the two go-redis setups a Lock with a deadline runs
// inline on: go-redis's defaults (relock's bounded clone) and
// ContextTimeoutEnabled.
var clientSetups = []struct {
	name string
	opts func(*redis.Options)
}{
	{"Default", func(*redis.Options) {}},
	{"ContextTimeoutEnabled", func(o *redis.Options) { o.ContextTimeoutEnabled = true }},
}

// An acquire cut short by its deadline while Redis is paused runs in Redis
// after the deadline (its request was in Redis's socket buffer); the
// caller has returned by its bound, and once Redis answers again the
// settlement (the same request sent again, then released) leaves nothing
// of the Client held: another Client takes every lock at once.
func TestCutShortAcquireThatRanAfterItsDeadlineLeavesNothingHeld(t *testing.T) {
	for _, setup := range clientSetups {
		t.Run(setup.name, func(t *testing.T) {
			srv := redistest.Start(t)
			c := relock.New(srv.Client(setup.opts), relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = c.Close() })
			other := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = other.Close() })
			for _, k := range deadlineKinds {
				if k.name == "RedLock" {
					continue // its node timeout bounds its rounds on goroutines of their own
				}
				l := k.open(c, "cut:"+k.name)
				hctx, err := l.Lock(context.Background()) // warm up: connection, scripts
				require.NoError(t, err, k.name)
				require.NoError(t, l.Unlock(hctx), k.name)
			}
			evalsBefore := commandCalls(t, srv.Client(), "evalsha")
			srv.Pause()
			var wg sync.WaitGroup
			for _, k := range deadlineKinds {
				if k.name == "RedLock" {
					continue
				}
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), callBound)
					defer cancel()
					start := time.Now()
					_, err := k.open(c, "cut:"+k.name).Lock(ctx)
					took := time.Since(start)
					assert.Less(t, took, callBound+boundSlack, "%s took %v", k.name, took)
					assert.ErrorIs(t, err, relock.ErrNotObtained, k.name)
					assert.ErrorIs(t, err, context.DeadlineExceeded, k.name)
				})
			}
			wg.Wait()
			srv.Resume()
			requireNothingOf(t, srv.Client(), c.ID(), 10*time.Second)
			assert.Greater(t, commandCalls(t, srv.Client(), "evalsha")-evalsBefore, int64(2*5),
				"the acquires ran, were sent again and released")
			for _, k := range deadlineKinds {
				if k.name == "RedLock" {
					continue
				}
				l := k.open(other, "cut:"+k.name)
				hctx, err := l.TryLock(context.Background(), 0, 0)
				require.NoError(t, err, "%s is free", k.name)
				require.NoError(t, l.Unlock(hctx), k.name)
			}
		})
	}
}

// A Lock whose context is cancelled (no deadline) while its request is in
// flight on a healthy Redis returns once Redis answers — within one round
// trip, here one made 150 ms long — not when go-redis's timeouts (3 s)
// would end it, fails with the context's cause, and leaves nothing held.
func TestCancelledLockReturnsWithinOneRoundTrip(t *testing.T) {
	const roundTrip = 150 * time.Millisecond
	for _, setup := range clientSetups {
		t.Run(setup.name, func(t *testing.T) {
			srv := redistest.Start(t)
			slow := &slowScripts{}
			rdb := srv.Client(setup.opts)
			rdb.AddHook(slow)
			c := relock.New(rdb, relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = c.Close() })
			l := c.Lock("cancelled")
			hctx, err := l.Lock(context.Background()) // warm up
			require.NoError(t, err)
			require.NoError(t, l.Unlock(hctx))

			slow.set(roundTrip)
			ctx, cancel := context.WithCancel(context.Background())
			sent := make(chan struct{})
			slow.onSend(func() { close(sent) })
			go func() { <-sent; cancel() }()
			start := time.Now()
			_, err = l.Lock(ctx)
			took := time.Since(start)
			slow.set(0)
			assert.ErrorIs(t, err, relock.ErrNotObtained)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Less(t, took, roundTrip+boundSlack, "a cancelled Lock waits for its round trip only")
			requireNothingOf(t, srv.Client(), c.ID(), 10*time.Second)
			hctx, err = l.TryLock(context.Background(), 0, 0)
			require.NoError(t, err, "the lock is free")
			require.NoError(t, l.Unlock(hctx))
		})
	}
}

// slowScripts delays every EVALSHA by d after it is handed to go-redis,
// telling sendHook first: a Redis whose round trip is d.
type slowScripts struct {
	relock.PassHook
	mu       sync.Mutex
	d        time.Duration
	sendHook func()
}

func (s *slowScripts) set(d time.Duration) { s.mu.Lock(); s.d = d; s.mu.Unlock() }
func (s *slowScripts) onSend(f func())     { s.mu.Lock(); s.sendHook = f; s.mu.Unlock() }

func (s *slowScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.mu.Lock()
		d, f := s.d, s.sendHook
		s.sendHook = nil
		s.mu.Unlock()
		if cmd.Name() == "evalsha" && d > 0 {
			if f != nil {
				f()
			}
			time.Sleep(d) // the round trip
		}
		return next(ctx, cmd)
	}
}

// commandCalls is how many times Redis has run command (INFO commandstats).
func commandCalls(t *testing.T, rdb *redis.Client, command string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	return parseCalls(info, "cmdstat_"+command+":calls=")
}

// parseCalls reads the number after prefix in an INFO reply (0: absent).
func parseCalls(info, prefix string) int64 {
	i := strings.Index(info, prefix)
	if i < 0 {
		return 0
	}
	rest := info[i+len(prefix):]
	end := strings.IndexAny(rest, ",\r\n")
	if end < 0 {
		end = len(rest)
	}
	n, _ := strconv.ParseInt(rest[:end], 10, 64)
	return n
}

// A TryLock with a wait of 1 ms is bounded by the attempt's grace (50 ms).
// On go-redis's default client it runs on a goroutine of relock's, which
// waits for the reply up to that bound, not on a clone whose read timeout
// would be a fraction of it: against a Redis that answers every request
// 15 ms late it obtains the lock, every time.
func TestShortTryLockOnTheDefaultClientWaitsItsWholeBound(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb, relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("short-bound")
	hctx, err := l.Lock(context.Background()) // warm up: connection, scripts
	require.NoError(t, err)
	require.NoError(t, l.Unlock(hctx))
	p.SetReplyDelay(15 * time.Millisecond)
	for range 5 {
		hctx, err := l.TryLock(context.Background(), time.Millisecond, 0)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(hctx))
	}
}
