package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A held Lock or FairLock costs Redis at most 200 bytes (MEMORY USAGE of
// its one key, the key's own overhead included), and its name is one key
// at most, free or held, however many releases or hand-overs it had: its
// hash keeps the last token and the release latch (see release_common.lua),
// and a FairLock's queue key lives only while waiters do.
func TestHeldLockMemoryAndFreeKeys(t *testing.T) {
	type named interface {
		exclusive
		Key() string
	}
	kinds := []struct {
		name   string
		of     func(c *relock.Client) named
		queued func(t testing.TB, rdb redis.UniversalClient, c *relock.Client) int
	}{
		{"Lock", func(c *relock.Client) named { return c.Lock("memory") },
			func(t testing.TB, rdb redis.UniversalClient, c *relock.Client) int {
				return lockQueueLen(t, rdb, c.Lock("memory").Key())
			}},
		{"FairLock", func(c *relock.Client) named { return c.FairLock("memory") },
			func(t testing.TB, rdb redis.UniversalClient, c *relock.Client) int {
				return fairLen(t, rdb, c.FairLock("memory").QueueKey())
			}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client()
			ctx := context.Background()
			c := relock.New(rdb)
			t.Cleanup(func() { _ = c.Close() })
			l := k.of(c)
			h, err := l.Lock(ctx)
			require.NoError(t, err)
			n, err := rdb.MemoryUsage(ctx, l.Key(), 0).Result()
			require.NoError(t, err)
			t.Logf("MEMORY USAGE of a held %s's hash: %d bytes", k.name, n)
			assert.LessOrEqual(t, n, int64(200), "bytes per held lock")
			waiter := lockAsync(k.of(c)) // handed over by the Unlock
			require.Eventually(t, func() bool { return k.queued(t, rdb, c) == 1 }, 5*time.Second, time.Millisecond)
			require.NoError(t, l.Unlock(h))
			g := <-waiter
			require.NoError(t, g.err)
			require.NoError(t, l.Unlock(g.ctx))
			for i := range 3 {
				o := relock.New(rdb)
				t.Cleanup(func() { _ = o.Close() })
				h, err := k.of(o).Lock(ctx)
				require.NoError(t, err, "round %d", i)
				require.NoError(t, k.of(o).Unlock(h))
			}
			keys := allKeys(t, rdb)
			t.Logf("keys left by a free %s after 5 releases: %v", k.name, keys)
			assert.LessOrEqual(t, len(keys), 1, "keys of a free lock name")
			h, err = l.Lock(ctx)
			require.NoError(t, err)
			keys = allKeys(t, rdb)
			t.Logf("keys of a held %s after 5 releases: %v", k.name, keys)
			assert.LessOrEqual(t, len(keys), 1, "keys of a held lock name")
			require.NoError(t, l.Unlock(h))
		})
	}
}
