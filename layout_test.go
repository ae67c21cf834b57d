package relock_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// layoutCall is one call of a kind on the name "future".
type layoutCall struct {
	name string
	call func(ctx context.Context, c *relock.Client) error
}

func lockCalls(kind string, open func(c *relock.Client) exclusive) []layoutCall {
	return []layoutCall{
		{kind + ".TryLock", func(ctx context.Context, c *relock.Client) error { _, err := open(c).TryLock(ctx, 0, 0); return err }},
		{kind + ".TryLock waiting", func(ctx context.Context, c *relock.Client) error {
			_, err := open(c).TryLock(ctx, time.Second, 0)
			return err
		}},
	}
}

// layoutKinds are, per kind, its main hash and the calls that read it.
var layoutKinds = []struct {
	kind  string
	key   func(c *relock.Client) string
	calls []layoutCall
}{
	{"Lock", func(c *relock.Client) string { return c.Lock("future").Key() }, append(lockCalls("Lock", func(c *relock.Client) exclusive { return c.Lock("future") }),
		layoutCall{"Lock.IsLocked", func(ctx context.Context, c *relock.Client) error {
			_, err := c.Lock("future").IsLocked(ctx)
			return err
		}},
		layoutCall{"Lock.TTL", func(ctx context.Context, c *relock.Client) error { _, err := c.Lock("future").TTL(ctx); return err }},
		layoutCall{"Lock.ForceUnlock", func(ctx context.Context, c *relock.Client) error {
			_, err := c.Lock("future").ForceUnlock(ctx)
			return err
		}},
		layoutCall{"MultiLock.TryLock", func(ctx context.Context, c *relock.Client) error {
			_, err := relock.NewMultiLock(c.Lock("future")).TryLock(ctx, 0, 0)
			return err
		}},
		layoutCall{"RedLock.TryLock", func(ctx context.Context, c *relock.Client) error {
			_, err := relock.NewRedLock("future", []*relock.Client{c}).TryLock(ctx, 0, 0)
			return err
		}})},
	{"SpinLock", func(c *relock.Client) string { return c.SpinLock("future").Key() }, lockCalls("SpinLock", func(c *relock.Client) exclusive { return c.SpinLock("future") })},
	{"FairLock", func(c *relock.Client) string { return c.FairLock("future").Key() }, append(lockCalls("FairLock", func(c *relock.Client) exclusive { return c.FairLock("future") }),
		layoutCall{"FairLock.ForceUnlock", func(ctx context.Context, c *relock.Client) error {
			_, err := c.FairLock("future").ForceUnlock(ctx)
			return err
		}})},
	{"RWLock", func(c *relock.Client) string { return c.RWLock("future").Key() }, append(lockCalls("WriteLock", func(c *relock.Client) exclusive { return c.RWLock("future").WriteLock() }),
		layoutCall{"ReadLock.TryLock", func(ctx context.Context, c *relock.Client) error {
			_, err := c.RWLock("future").ReadLock().TryLock(ctx, 0, 0)
			return err
		}},
		layoutCall{"ReadLock.IsLocked", func(ctx context.Context, c *relock.Client) error {
			_, err := c.RWLock("future").ReadLock().IsLocked(ctx)
			return err
		}})},
	{"Semaphore", func(c *relock.Client) string { return c.Semaphore("future", 2).Key() }, []layoutCall{
		{"Semaphore.TryAcquire", func(ctx context.Context, c *relock.Client) error {
			_, err := c.Semaphore("future", 2).TryAcquire(ctx, 1, 0, 0)
			return err
		}},
		{"Semaphore.State", func(ctx context.Context, c *relock.Client) error {
			_, err := c.Semaphore("future", 2).State(ctx)
			return err
		}},
		{"Semaphore.SetPermits", func(ctx context.Context, c *relock.Client) error { return c.Semaphore("future", 2).SetPermits(ctx, 3) }},
		{"Semaphore.ForceRelease", func(ctx context.Context, c *relock.Client) error {
			_, err := c.Semaphore("future", 2).ForceRelease(ctx)
			return err
		}},
	}},
	{"CountDownLatch", func(c *relock.Client) string { return c.CountDownLatch("future").Key() }, []layoutCall{
		{"CountDownLatch.TrySetCount", func(ctx context.Context, c *relock.Client) error {
			_, err := c.CountDownLatch("future").TrySetCount(ctx, 1)
			return err
		}},
		{"CountDownLatch.CountDown", func(ctx context.Context, c *relock.Client) error { return c.CountDownLatch("future").CountDown(ctx) }},
		{"CountDownLatch.Count", func(ctx context.Context, c *relock.Client) error {
			_, err := c.CountDownLatch("future").Count(ctx)
			return err
		}},
		{"CountDownLatch.Wait", func(ctx context.Context, c *relock.Client) error { return c.CountDownLatch("future").Wait(ctx) }},
		{"CountDownLatch.Delete", func(ctx context.Context, c *relock.Client) error {
			_, err := c.CountDownLatch("future").Delete(ctx)
			return err
		}},
	}},
}

// Every call of every kind that meets a record of a layout this relock
// does not know (a main hash with ~v 2, as a later version would write)
// refuses with ErrIncompatibleLayout, and an acquire also with
// ErrNotObtained, changing nothing in Redis.
func TestFutureLayoutIsRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		ctx := context.Background()
		for _, k := range layoutKinds {
			key := k.key(c)
			require.NoError(t, b.rdb.HSet(ctx, key, "~v", "2", "~g", "later:1", "~t", "7", "n", "1", "~p", "2").Err())
			require.NoError(t, b.rdb.PExpire(ctx, key, time.Minute).Err())
			before := layoutSnapshot(t, b.rdb)
			for _, call := range k.calls {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				start := time.Now()
				err := call.call(cctx, c)
				cancel()
				assert.ErrorIs(t, err, relock.ErrIncompatibleLayout, call.name)
				assert.NotErrorIs(t, err, relock.ErrUnavailable, call.name)
				if strings.Contains(call.name, ".TryLock") || strings.HasSuffix(call.name, ".TryAcquire") || strings.HasSuffix(call.name, ".Wait") {
					assert.ErrorIs(t, err, relock.ErrNotObtained, call.name)
				}
				assert.Less(t, time.Since(start), time.Second, "%s waited instead of refusing", call.name)
				assert.Equal(t, before, layoutSnapshot(t, b.rdb), "%s changed Redis", call.name)
			}
			_, err := c.Inspect(ctx, "future")
			assert.ErrorIs(t, err, relock.ErrIncompatibleLayout, "%s: Inspect", k.kind)
			require.NoError(t, b.rdb.Del(ctx, key).Err())
		}
	})
}

// A hold whose record a later version rewrote in its own layout is not
// released by this one: Unlock refuses with ErrIncompatibleLayout and
// changes nothing.
func TestReleaseOfAFutureLayoutIsRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		ctx := context.Background()
		kinds := []struct {
			name string
			key  string
			take func() (context.Context, error)
			free func(context.Context) error
		}{
			{"Lock", c.Lock("later").Key(), func() (context.Context, error) { return c.Lock("later").TryLock(ctx, 0, time.Minute) }, c.Lock("later").Unlock},
			{"FairLock", c.FairLock("later").Key(), func() (context.Context, error) { return c.FairLock("later").TryLock(ctx, 0, time.Minute) }, c.FairLock("later").Unlock},
			{"WriteLock", c.RWLock("later").Key(), func() (context.Context, error) { return c.RWLock("later").WriteLock().TryLock(ctx, 0, time.Minute) }, c.RWLock("later").WriteLock().Unlock},
			{"Semaphore", c.Semaphore("later", 2).Key(), func() (context.Context, error) { return c.Semaphore("later", 2).TryAcquire(ctx, 1, 0, time.Minute) },
				c.Semaphore("later", 2).Release},
		}
		for _, k := range kinds {
			h, err := k.take()
			require.NoError(t, err, k.name)
			require.NoError(t, b.rdb.HSet(ctx, k.key, "~v", "2").Err())
			before := layoutSnapshot(t, b.rdb)
			err = k.free(h)
			assert.ErrorIs(t, err, relock.ErrIncompatibleLayout, k.name)
			assert.Equal(t, before, layoutSnapshot(t, b.rdb), "%s's Unlock changed Redis", k.name)
			require.NoError(t, b.rdb.FlushAll(ctx).Err())
		}
	})
}

// layoutSnapshot is every key of rdb with its type and content, without TTLs.
func layoutSnapshot(t *testing.T, rdb *redis.Client) []string {
	ctx := context.Background()
	var out []string
	for _, k := range allKeys(t, rdb) {
		typ := rdb.Type(ctx, k).Val()
		var v any
		switch typ {
		case "hash":
			v = rdb.HGetAll(ctx, k).Val()
		case "zset":
			v = rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
		default:
			v = rdb.Dump(ctx, k).Val()
		}
		out = append(out, fmt.Sprintf("%s %s %v", k, typ, v))
	}
	sort.Strings(out)
	return out
}
