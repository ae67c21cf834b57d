package relock_test

import (
	"context"
	"testing"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A held Lock costs Redis at most 200 bytes (MEMORY USAGE of its one key,
// the key's own overhead included), and a Lock name is one key at most,
// free or held, however many releases it had: its hash keeps the last
// token and the release latch (see release_common.lua).
func TestHeldLockMemoryAndFreeKeys(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("memory")
	h, err := l.Lock(ctx)
	require.NoError(t, err)
	n, err := rdb.MemoryUsage(ctx, l.Key(), 0).Result()
	require.NoError(t, err)
	t.Logf("MEMORY USAGE of a held Lock's hash: %d bytes", n)
	assert.LessOrEqual(t, n, int64(200), "bytes per held Lock")
	require.NoError(t, l.Unlock(h))
	for i := range 3 {
		o := relock.New(rdb)
		t.Cleanup(func() { _ = o.Close() })
		h, err := o.Lock("memory").Lock(ctx)
		require.NoError(t, err, "round %d", i)
		require.NoError(t, o.Lock("memory").Unlock(h))
	}
	keys := allKeys(t, rdb)
	t.Logf("keys left by a free Lock after 4 releases: %v", keys)
	assert.LessOrEqual(t, len(keys), 1, "keys of a free lock name")
	h, err = l.Lock(ctx)
	require.NoError(t, err)
	keys = allKeys(t, rdb)
	t.Logf("keys of a held Lock after 4 releases: %v", keys)
	assert.LessOrEqual(t, len(keys), 1, "keys of a held lock name")
	require.NoError(t, l.Unlock(h))
}
