package relock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/relock-go/relock"
	"github.com/stretchr/testify/require"
)

// scoped is one kind's Do, as a caller runs it.
type scoped struct {
	name string
	do   func(c *relock.Client, ctx context.Context, fn func(context.Context) error) error
}

var scopedKinds = []scoped{
	{"Lock", func(c *relock.Client, ctx context.Context, fn func(context.Context) error) error {
		return c.Lock("do").Do(ctx, fn)
	}},
	{"FairLock", func(c *relock.Client, ctx context.Context, fn func(context.Context) error) error {
		return c.FairLock("do").Do(ctx, fn)
	}},
	{"ReadLock", func(c *relock.Client, ctx context.Context, fn func(context.Context) error) error {
		return c.RWLock("do").ReadLock().Do(ctx, fn)
	}},
	{"WriteLock", func(c *relock.Client, ctx context.Context, fn func(context.Context) error) error {
		return c.RWLock("do").WriteLock().Do(ctx, fn)
	}},
	{"MultiLock", func(c *relock.Client, ctx context.Context, fn func(context.Context) error) error {
		return relock.NewMultiLock(c.Lock("do-a"), c.Lock("do-b")).Do(ctx, fn)
	}},
	{"RedLock", func(c *relock.Client, ctx context.Context, fn func(context.Context) error) error {
		return relock.NewRedLock("do", []*relock.Client{c}).Do(ctx, fn)
	}},
	{"Semaphore", func(c *relock.Client, ctx context.Context, fn func(context.Context) error) error {
		return c.Semaphore("do", 2).Do(ctx, 1, fn)
	}},
}

// Do keeps its failures apart for every kind: a *ReleaseError exactly when
// fn succeeded and only the release failed (here: the hold was deleted while
// fn ran, so the release finds it lost), fn's own error otherwise, and
// nothing held afterwards.
func TestDoTellsAFailedReleaseFromAFailedFunc(t *testing.T) {
	b := newMini(t)
	boom := errors.New("boom")
	for _, k := range scopedKinds {
		t.Run(k.name, func(t *testing.T) {
			c := b.newClient(t)
			ctx := context.Background()
			lose := func(ctx context.Context) { require.NoError(t, b.rdb.FlushAll(ctx).Err()) }

			require.NoError(t, k.do(c, ctx, func(context.Context) error { return nil }))

			err := k.do(c, ctx, func(ctx context.Context) error { lose(ctx); return nil })
			var rel *relock.ReleaseError
			require.ErrorAs(t, err, &rel, "fn succeeded, the release did not: %v", err)
			require.ErrorIs(t, err, relock.ErrLockLost)

			err = k.do(c, ctx, func(ctx context.Context) error { lose(ctx); return boom })
			require.ErrorIs(t, err, boom)
			require.ErrorIs(t, err, relock.ErrLockLost, "the release's failure is still told")
			require.False(t, errors.As(err, &rel), "fn failed: no ReleaseError: %v", err)

			err = k.do(c, ctx, func(context.Context) error { return boom })
			require.ErrorIs(t, err, boom)
			require.False(t, errors.As(err, &rel), "%v", err)

			keys, err := b.rdb.Keys(ctx, "*").Result()
			require.NoError(t, err)
			for _, key := range keys { // only the release's tail latch, which expires
				ttl, err := b.rdb.PTTL(ctx, key).Result()
				require.NoError(t, err)
				require.Positive(t, ttl, "key %s outlives every Do", key)
			}
		})
	}
}
