package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// heldBy is one kind's hold taken and released on a Client, for the
// Observer's Holder: what Acquired, Released and Lost name.
type heldBy struct {
	kind   relock.Kind
	lock   func(c *relock.Client, ctx context.Context) (context.Context, error)
	unlock func(c *relock.Client, hctx context.Context) error
	red    bool // a RedLock: the owner's field in Redis ends in ":red"
}

var heldByKinds = []heldBy{
	{relock.KindLock, func(c *relock.Client, ctx context.Context) (context.Context, error) { return c.Lock("h").Lock(ctx) },
		func(c *relock.Client, h context.Context) error { return c.Lock("h").Unlock(h) }, false},
	{relock.KindFairLock, func(c *relock.Client, ctx context.Context) (context.Context, error) { return c.FairLock("h").Lock(ctx) },
		func(c *relock.Client, h context.Context) error { return c.FairLock("h").Unlock(h) }, false},
	{relock.KindReadLock, func(c *relock.Client, ctx context.Context) (context.Context, error) {
		return c.RWLock("h").ReadLock().Lock(ctx)
	},
		func(c *relock.Client, h context.Context) error { return c.RWLock("h").ReadLock().Unlock(h) }, false},
	{relock.KindWriteLock, func(c *relock.Client, ctx context.Context) (context.Context, error) {
		return c.RWLock("h").WriteLock().Lock(ctx)
	},
		func(c *relock.Client, h context.Context) error { return c.RWLock("h").WriteLock().Unlock(h) }, false},
	{relock.KindSemaphore, func(c *relock.Client, ctx context.Context) (context.Context, error) {
		return c.Semaphore("h", 2).Acquire(ctx, 1)
	},
		func(c *relock.Client, h context.Context) error { return c.Semaphore("h", 2).Release(h) }, false},
	{relock.KindSpinLock, func(c *relock.Client, ctx context.Context) (context.Context, error) { return c.SpinLock("h").Lock(ctx) },
		func(c *relock.Client, h context.Context) error { return c.SpinLock("h").Unlock(h) }, false},
	{relock.KindRedLock, func(c *relock.Client, ctx context.Context) (context.Context, error) {
		return relock.NewRedLock("h", []*relock.Client{c}).Lock(ctx)
	}, func(c *relock.Client, h context.Context) error {
		return relock.NewRedLock("h", []*relock.Client{c}).Unlock(h)
	}, true},
}

// Every event about a hold or a wait names its owner, as its field in Redis
// reads, and its Client's name, from the Client itself: Acquired, Released
// and Lost of every kind, and WaitEnded (the waiter's).
func TestObserverEventsNameTheHolder(t *testing.T) {
	b := newReal(t)
	ev := &events{}
	c := b.newClient(t, relock.WithObserver(ev.observer()), relock.WithName("orders-1"))
	bg := context.Background()
	for _, k := range heldByKinds {
		h, err := k.lock(c, bg)
		require.NoError(t, err, k.kind)
		want := relock.Holder{Owner: ownerField(t, c, h), ClientName: "orders-1"}
		if k.red {
			assert.Contains(t, hgetall(t, b.rdb, c.Lock("h").Key()), want.Owner+":red", "as the RedLock's master records it")
		}
		require.NoError(t, k.unlock(c, h), k.kind)
		ev.mu.Lock()
		acq, rel := ev.acquired[len(ev.acquired)-1], ev.released[len(ev.released)-1]
		ev.mu.Unlock()
		assert.Equal(t, k.kind, acq.Kind)
		assert.Equal(t, want, acq.Holder, "Acquired of %s", k.kind)
		assert.Equal(t, want, rel.Holder, "Released of %s", k.kind)
	}

	// A wait names the waiter; a loss names the holder that lost.
	h, err := c.Lock("w").Lock(bg)
	require.NoError(t, err)
	holder := ownerField(t, c, h)
	waited := make(chan context.Context, 1)
	go func() {
		w, err := c.Lock("w").TryLock(bg, 5*time.Second, 0)
		assert.NoError(t, err)
		waited <- w
	}()
	require.Eventually(t, func() bool { return ev.waiting.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Lock("w").Unlock(h))
	w := <-waited
	_, err = c.Lock("w").ForceUnlock(bg)
	require.NoError(t, err)
	<-w.Done()
	ev.mu.Lock()
	defer ev.mu.Unlock()
	require.Len(t, ev.waits, 1)
	require.Len(t, ev.lost, 1)
	waiter := ownerField(t, c, w)
	assert.NotEqual(t, holder, waiter)
	assert.Equal(t, relock.Holder{Owner: waiter, ClientName: "orders-1"}, ev.waits[0].Holder)
	assert.Equal(t, relock.Holder{Owner: waiter, ClientName: "orders-1"}, ev.lost[0].Holder)
}
