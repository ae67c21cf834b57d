package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// An acquire cut short by its deadline whose request reaches Redis only
// after the Client has settled it — sent the request again on another
// connection and released what that took — finds its op id voided and
// takes nothing: the lock stays free for others, and once the late request
// has run nothing of the Client is left in Redis: for every kind that
// acquires (a CountDownLatch does not). Unfenced, the late request would
// take the lock anew, for a hold nobody knows of, until its lease (the
// watchdog's 30 s) ran out.
//
// The proxy freezes the connection the request goes out on: the request
// stays in the network, or in a socket buffer Redis has not read yet,
// while the settlement goes out on a new connection and runs first. It
// stalls every connection until the Lock has failed, so that no later
// attempt takes the lock by the deadline.
func TestCutShortAcquireArrivingAfterItsSettlementTakesNothing(t *testing.T) {
	for _, setup := range clientSetups {
		t.Run(setup.name, func(t *testing.T) {
			for _, k := range deadlineKinds {
				t.Run(k.name, func(t *testing.T) {
					t.Parallel()
					lateAcquireTakesNothing(t, setup.opts, k.name, func(c *relock.Client, name string) lateLocker { return k.open(c, name) })
				})
			}
			t.Run("Semaphore", func(t *testing.T) {
				t.Parallel()
				lateAcquireTakesNothing(t, setup.opts, "Semaphore", func(c *relock.Client, name string) lateLocker {
					return onePermit{c.Semaphore(name, 1)}
				})
			})
		})
	}
}

// lateLocker is what lateAcquireTakesNothing uses of a kind.
type lateLocker interface {
	Lock(ctx context.Context) (context.Context, error)
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
}

// onePermit is a Semaphore's single permit as a lateLocker.
type onePermit struct{ s *relock.Semaphore }

func (p onePermit) Lock(ctx context.Context) (context.Context, error) { return p.s.Acquire(ctx, 1) }
func (p onePermit) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return p.s.TryAcquire(ctx, 1, wait, lease)
}
func (p onePermit) Unlock(ctx context.Context) error { return p.s.Release(ctx) }

func lateAcquireTakesNothing(t *testing.T, setup func(*redis.Options), kind string, open func(*relock.Client, string) lateLocker) {
	srv := redistest.Start(t)
	admin := srv.Client()
	p := redistest.NewProxy(t, srv.Addr())
	opts := &redis.Options{Addr: p.Addr(), PoolSize: 1}
	setup(opts)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb, relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	other := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = other.Close() })
	name := "late:" + kind
	hctx, err := open(c, name).Lock(context.Background()) // warm up: the connection, the scripts
	require.NoError(t, err)
	require.NoError(t, open(c, name).Unlock(hctx))

	p.Freeze()
	p.Stall() // no attempt after the first one gets through by the deadline either
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	_, err = open(c, name).Lock(ctx)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	p.Unstall()
	// Close returns once the settlement is done: it waits for it.
	require.NoError(t, c.Close())
	sent := commandCalls(t, admin, "evalsha")
	p.Thaw()
	require.Eventually(t, func() bool { return commandCalls(t, admin, "evalsha") > sent },
		10*time.Second, 5*time.Millisecond, "the frozen request reaches Redis")

	hctx, err = open(other, name).TryLock(context.Background(), 0, 0)
	require.NoError(t, err, "the late request took nothing: the lock is free")
	assert.NoError(t, open(other, name).Unlock(hctx))
	requireNothingOf(t, admin, c.ID(), 10*time.Second)
}
