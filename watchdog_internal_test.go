package relock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// staleSetup gives an owner's second hold on a lock (lease 2 s) and the
// generation of its first, already released one: what a renewal built
// before the release and answered after the re-acquire describes.
func staleSetup(t *testing.T) (c *Client, l *Lock, h2 context.Context, field, gen1 string) {
	t.Helper()
	srv := redistest.Start(t)
	c = New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	l = c.Lock("stale")
	owner := NewOwner(context.Background())
	h1, err := l.Lock(owner)
	require.NoError(t, err)
	field = ownerFrom(h1).field(c)
	gen1, _, _ = c.holds.find(l.keys.hash, field)
	require.NoError(t, l.Unlock(h1))
	h2, err = l.TryLock(owner, 0, 2*time.Second)
	require.NoError(t, err)
	gen2, _, _ := c.holds.find(l.keys.hash, field)
	require.NotEqual(t, gen1, gen2, "a new hold is a new generation")
	return c, l, h2, field, gen1
}

// In Redis, a renewal of an ended generation neither renews
// nor extends the owner's next hold.
func TestRenewalOfAnEndedGenerationChangesNothing(t *testing.T) {
	c, l, h2, field, gen1 := staleSetup(t)
	stale := lockScheme{l}.renewal(field, gen1, time.Minute)
	results, errs := c.dog.renew([]renewal{stale}, time.Now().Add(time.Second))
	require.NoError(t, errs[0])
	require.EqualValues(t, 0, results[0], "the old generation is gone")
	ttl, err := l.TTL(context.Background())
	require.NoError(t, err)
	require.LessOrEqual(t, ttl, 2*time.Second, "the new hold's lease was not extended by a stale renewal")
	require.NoError(t, l.Unlock(h2))
}

// In the Client, a "gone" result about an ended generation does
// not end the owner's next hold, and a failure about it is not counted.
func TestStaleRenewalResultDoesNotEndANewHold(t *testing.T) {
	c, l, h2, field, gen1 := staleSetup(t)
	c.holds.mu.Lock()
	h := c.holds.m[holdKey{l.keys.hash, field}]
	c.holds.mu.Unlock()
	require.NotNil(t, h)
	_, failed, _ := c.dog.apply([]*hold{h, h}, []string{gen1, gen1}, []int64{0, 0},
		[]error{nil, errors.New("timeout")}, time.Now())
	require.Zero(t, failed, "a failure about an ended generation is not this hold's")
	require.NoError(t, h2.Err(), "the new hold must stay live")
	require.NoError(t, l.Unlock(h2))
}

// A renewal's reply that comes after Close began changes nothing: the hold
// Close could not release (Redis paused) keeps the lease end it had, so the
// lease heap's timer is not pushed on, and is not called lost either.
func TestLateRenewalReplyAfterCloseChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client(), WithUnlockTimeout(100*time.Millisecond))
	l := c.Lock("late-renewal")
	hctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	field := ownerFrom(hctx).field(c)
	c.holds.mu.Lock()
	h := c.holds.m[holdKey{l.keys.hash, field}]
	c.holds.mu.Unlock()
	srv.Pause()
	defer srv.Resume()
	require.NoError(t, c.Close())
	c.holds.mu.Lock()
	gen, end := h.gen, h.expiresAt.get()
	c.holds.mu.Unlock()
	require.NotEmpty(t, gen, "Close could not release the hold on a paused Redis")
	_, failed, _ := c.dog.apply([]*hold{h, h}, []string{gen, gen}, []int64{1, 0}, []error{nil, nil}, time.Now())
	require.Zero(t, failed)
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	require.Equal(t, end, h.expiresAt.get(), "a late renewal extended a hold after Close")
	require.Equal(t, gen, h.gen, "a late reply ended the hold after Close")
	require.ErrorIs(t, context.Cause(hctx), ErrClientClosed)
}
