package relock

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pendingCount is how many releases c's retrier keeps now.
func pendingCount(c *Client) int {
	c.releases.mu.Lock()
	defer c.releases.mu.Unlock()
	return len(c.releases.pending)
}

// A Client's retrier of RedLock releases keeps at most maxPendingReleases
// while its master does not answer, sends a release queued twice once, and
// sends every release it kept once the master answers, then stops.
func TestReleaseRetrierIsBoundedAndCoalesces(t *testing.T) {
	c := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	t.Cleanup(func() { _ = c.Close() })
	answer := make(chan struct{}) // closed when the master answers
	var sent atomic.Int64
	ran := make(map[string]*atomic.Int64)
	until := time.Now().Add(time.Minute)
	queue := func(key string) {
		n := ran[key]
		if n == nil {
			n = new(atomic.Int64)
			ran[key] = n
		}
		c.retryRelease(key, func(context.Context) error {
			<-answer
			sent.Add(1)
			n.Add(1)
			return nil
		}, until)
	}
	for i := range maxPendingReleases + 100 {
		queue(strconv.Itoa(i))
	}
	queue("0")
	queue("1")
	assert.Equal(t, maxPendingReleases, pendingCount(c), "the queue is bounded")

	close(answer)
	require.Eventually(t, func() bool { return pendingCount(c) == 0 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, int64(maxPendingReleases), sent.Load(), "every release kept was sent")
	assert.Equal(t, int64(1), ran["0"].Load(), "a release queued twice is sent once")
	assert.Equal(t, int64(0), ran[strconv.Itoa(maxPendingReleases)].Load(), "a release past the bound is not kept")
	c.releases.mu.Lock()
	defer c.releases.mu.Unlock()
	assert.False(t, c.releases.running, "the retrier stops when nothing waits")
	assert.Empty(t, c.releases.queued)
}

// Close waits for a retrier whose request hangs only within its unlock
// timeout, and a release whose lease has ended is not sent.
func TestReleaseRetrierCloseIsBounded(t *testing.T) {
	const bound = 200 * time.Millisecond
	c := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), WithUnlockTimeout(bound))
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	started := make(chan struct{})
	c.retryRelease("hung", func(context.Context) error {
		close(started)
		<-hung
		return nil
	}, time.Now().Add(time.Minute))
	<-started
	var expiredSent atomic.Bool
	c.retryRelease("expired", func(context.Context) error {
		expiredSent.Store(true)
		return nil
	}, time.Now().Add(-time.Millisecond))

	begun := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(begun)
	assert.Less(t, took, bound+300*time.Millisecond, "Close waited %v for a hung release", took)
	assert.False(t, expiredSent.Load())
}
