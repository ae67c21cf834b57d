package relock_test

import (
	"context"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// TestEveryRedisCallGoesThroughTheFunnel: every call a Client makes to
// Redis, not only Lock and Unlock, reacts to a network fault (the Client
// checks its holds: Redis may have restarted) and returns an error that
// names what failed and is still errors.Is-able. Redis is a port nothing
// listens on.
func TestEveryRedisCallGoesThroughTheFunnel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())

	calls := map[string]func(ctx context.Context, c *relock.Client) error{
		"is locked": func(ctx context.Context, c *relock.Client) error { _, err := c.Lock("l").IsLocked(ctx); return err },
		"hold count": func(ctx context.Context, c *relock.Client) error {
			_, err := c.Lock("l").HoldCount(relock.NewOwner(ctx))
			return err
		},
		"ttl": func(ctx context.Context, c *relock.Client) error { _, err := c.Lock("l").TTL(ctx); return err },
		"force unlock": func(ctx context.Context, c *relock.Client) error {
			_, err := c.FairLock("l").ForceUnlock(ctx)
			return err
		},
		"inspect":    func(ctx context.Context, c *relock.Client) error { _, err := c.Inspect(ctx, "l"); return err },
		"list locks": func(ctx context.Context, c *relock.Client) error { _, err := c.ListLocks(ctx, "*"); return err },
		"state": func(ctx context.Context, c *relock.Client) error {
			_, err := c.RWLock("l").ReadLock().HoldCount(ctx)
			return err
		},
		"latch set count": func(ctx context.Context, c *relock.Client) error {
			_, err := c.CountDownLatch("l").TrySetCount(ctx, 1)
			return err
		},
		"latch count down": func(ctx context.Context, c *relock.Client) error { return c.CountDownLatch("l").CountDown(ctx) },
		"latch count": func(ctx context.Context, c *relock.Client) error {
			_, err := c.CountDownLatch("l").Count(ctx)
			return err
		},
		"latch delete": func(ctx context.Context, c *relock.Client) error {
			_, err := c.CountDownLatch("l").Delete(ctx)
			return err
		},
		"semaphore state": func(ctx context.Context, c *relock.Client) error {
			_, err := c.Semaphore("l", 2).State(ctx)
			return err
		},
		"set permits": func(ctx context.Context, c *relock.Client) error { return c.Semaphore("l", 2).SetPermits(ctx, 3) },
		"acquire (TryLock)": func(ctx context.Context, c *relock.Client) error {
			_, err := c.Lock("l").TryLock(ctx, 0, 0)
			return err
		},
	}
	for what, call := range calls {
		t.Run(what, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: time.Second})
			t.Cleanup(func() { _ = rdb.Close() })
			log := &relock.CountingHandler{}
			c := relock.New(rdb, relock.WithLogger(slog.New(log)))
			t.Cleanup(func() { _ = c.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()

			err := call(ctx, c)
			require.Error(t, err)
			require.ErrorIs(t, err, syscall.ECONNREFUSED, "the cause stays errors.Is-able")
			require.Contains(t, err.Error(), "relock: ", "the error names relock")
			require.Eventually(t, func() bool { return log.Mentions("checking every hold") > 0 }, 5*time.Second, 5*time.Millisecond,
				"a network fault of %s must make the Client check its holds", what)
		})
	}
}
