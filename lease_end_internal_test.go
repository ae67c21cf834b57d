package relock

import (
	"container/heap"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// pastLeaseEnd moves the local lease end of every live hold of c that
// matches into the past, as a lease heap's timer firing late would leave
// it: the heap is reordered, the timer stays armed for the old end. It
// returns how many it moved.
func pastLeaseEnd(c *Client, match func(*hold) bool) int {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	n := 0
	for _, h := range c.holds.m {
		if h.gen != "" && match(h) {
			h.expiresAt.set(monoOf(time.Now().Add(-time.Millisecond)))
			heap.Fix(&c.holds.leases, int(h.slot-1))
			n++
		}
	}
	return n
}

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

	require.Equal(t, 1, pastLeaseEnd(c, func(*hold) bool { return true }))
	_, err = l.Token(hctx)
	require.ErrorIs(t, err, ErrNotHeld)
}

// A hold context's Err reports the hold's end once its lease has run out
// by the Client's clock, though the lease heap's timer has not fired yet,
// for every kind that holds: a holder that checks Err before each write
// never writes past its lease. Err ends the hold then (Done closed, the
// cause ErrLockLost, Token refused), and does so for a MultiLock whichever
// part's lease ran out. A CountDownLatch has no hold.
func TestHoldContextErrReadsTheLeaseEnd(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	type held struct {
		ctx    context.Context
		token  func(context.Context) (int64, error) // nil: the kind has no Token
		unlock func(context.Context) error
	}
	type kind struct {
		name  string
		parts []string // the names of the locks one call holds, from its own
		hold  func(name string) (held, error)
	}
	bg := context.Background()
	kinds := []kind{
		{"Lock", []string{""}, func(n string) (held, error) {
			l := c.Lock(n)
			hctx, err := l.Lock(bg)
			return held{hctx, l.Token, l.Unlock}, err
		}},
		{"FairLock", []string{""}, func(n string) (held, error) {
			l := c.FairLock(n)
			hctx, err := l.Lock(bg)
			return held{hctx, l.Token, l.Unlock}, err
		}},
		{"ReadLock", []string{""}, func(n string) (held, error) {
			l := c.RWLock(n).ReadLock()
			hctx, err := l.Lock(bg)
			return held{hctx, nil, l.Unlock}, err
		}},
		{"WriteLock", []string{""}, func(n string) (held, error) {
			l := c.RWLock(n).WriteLock()
			hctx, err := l.Lock(bg)
			return held{hctx, l.Token, l.Unlock}, err
		}},
		{"MultiLock", []string{":a", ":b"}, func(n string) (held, error) {
			m := NewMultiLock(c.Lock(n+":a"), c.Lock(n+":b"))
			hctx, err := m.Lock(bg)
			return held{hctx, nil, m.Unlock}, err
		}},
		{"RedLock", []string{""}, func(n string) (held, error) {
			r := NewRedLock(n, []*Client{c})
			hctx, err := r.Lock(bg)
			return held{hctx, r.Token, r.Unlock}, err
		}},
		{"Semaphore", []string{""}, func(n string) (held, error) {
			s := c.Semaphore(n, 2)
			hctx, err := s.Acquire(bg, 1)
			return held{hctx, nil, s.Release}, err
		}},
		{"SpinLock", []string{""}, func(n string) (held, error) {
			l := c.SpinLock(n)
			hctx, err := l.Lock(bg)
			return held{hctx, l.Token, l.Unlock}, err
		}},
	}
	liveHolds := func() int {
		c.holds.mu.Lock()
		defer c.holds.mu.Unlock()
		live := 0
		for _, h := range c.holds.m {
			if h.gen != "" {
				live++
			}
		}
		return live
	}
	for _, k := range kinds {
		for _, part := range k.parts {
			t.Run(k.name+part, func(t *testing.T) {
				name := "lease-end-" + k.name + strings.TrimPrefix(part, ":")
				hx, err := k.hold(name)
				require.NoError(t, err)
				require.NoError(t, hx.ctx.Err())
				if hx.token != nil {
					_, err := hx.token(hx.ctx)
					require.NoError(t, err)
				}
				require.Equal(t, len(k.parts), liveHolds())
				require.Equal(t, 1, pastLeaseEnd(c, func(h *hold) bool {
					return strings.HasSuffix(h.key.id, name+part) || strings.Contains(h.key.id, "{"+name+part+"}")
				}))

				require.Error(t, hx.ctx.Err(), "Err before the lease heap's timer fired")
				select {
				case <-hx.ctx.Done():
				default:
					t.Fatal("Err reported the end but Done is open")
				}
				require.ErrorIs(t, context.Cause(hx.ctx), ErrLockLost)
				if hx.token != nil {
					_, err := hx.token(hx.ctx)
					require.ErrorIs(t, err, ErrNotHeld)
				}
				require.Equal(t, len(k.parts)-1, liveHolds(), "the part whose lease ran out still counts as held")
				_ = hx.unlock(hx.ctx) // a MultiLock's other part; the lock in Redis
				require.Zero(t, liveHolds())
			})
		}
	}
}
