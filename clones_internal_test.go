package relock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hooksOf reads a go-redis client's hooks in their order, and New makes
// the bounded clones once, each with those hooks, below the client's own
// timeouts only, and none for a client that ends requests at their
// deadline itself or that is not a *redis.Client.
func TestNewClonesTheClientWithItsHooks(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	first, second := &countingHook{}, &countingHook{}
	rdb.AddHook(first)
	rdb.AddHook(second)
	hooks, ok := hooksOf(rdb)
	require.True(t, ok, "go-redis's layout is known")
	assert.Equal(t, []redis.Hook{first, second}, hooks)

	c := New(rdb)
	defer c.Close()
	made := 0
	for i, clone := range c.clones.clones {
		if clone == nil {
			continue
		}
		made++
		assert.Equal(t, slackBuckets[i]/2, clone.Options().ReadTimeout)
		got, ok := hooksOf(clone)
		require.True(t, ok)
		assert.Equal(t, hooks, got, "bucket %v", slackBuckets[i])
	}
	assert.Equal(t, len(slackBuckets), made, "every bucket is below go-redis's default 3 s + 3 s")

	short := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 30 * time.Millisecond, WriteTimeout: 30 * time.Millisecond}))
	defer short.Close()
	assert.NotNil(t, short.clones.clones[bucketWithin(50*time.Millisecond)])
	assert.Nil(t, short.clones.clones[bucketWithin(100*time.Millisecond)], "none at or above its own 60 ms")
	for _, rdb := range []redis.UniversalClient{
		redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}),
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}),
		wrapped{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})},
	} {
		c := New(rdb)
		assert.False(t, c.clones.any, "%T", rdb)
		_ = c.Close()
		_ = rdb.Close()
	}
}

type countingHook struct{ n int }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
