package relock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// Token refuses a hold whose lease has run out by the Client's clock even
// before the lease heap's timer has ended its record and its context (a
// timer fires late on a loaded machine): a worker that checks its token
// before it enters never enters a hold Redis may have given away (fault
// schedule lock/931018).
func TestTokenRefusesAHoldPastItsLeaseEnd(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("token-expiry")
	hctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	_, err = l.Token(hctx)
	require.NoError(t, err)

	owner := ownerFrom(hctx).field(c)
	c.holds.mu.Lock()
	h := c.holds.m[holdKey{l.keys.hash, owner}]
	require.NotNil(t, h)
	end := h.expiresAt
	h.expiresAt = monoOf(time.Now().Add(-time.Millisecond)) // its timer still armed for the old end
	c.holds.mu.Unlock()

	_, err = l.Token(hctx)
	require.ErrorIs(t, err, ErrNotHeld)
	require.NoError(t, hctx.Err(), "the context ends when the timer fires, not here")

	c.holds.mu.Lock()
	h.expiresAt = end
	c.holds.mu.Unlock()
	require.NoError(t, l.Unlock(hctx))
}
