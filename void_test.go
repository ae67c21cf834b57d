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
	name := "late:" + kind
	srv, p, c := warmClientBehindProxy(t, setup, name, open)
	admin := srv.Client()
	other := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = other.Close() })

	p.Freeze()
	p.Stall() // no attempt after the first one gets through by the deadline either
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	_, err := open(c, name).Lock(ctx)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	p.Unstall()
	// Close returns once the settlement is done: it waits for it.
	require.NoError(t, c.Close())
	thawAndAwait(t, admin, p)

	hctx, err := open(other, name).TryLock(context.Background(), 0, 0)
	require.NoError(t, err, "the late request took nothing: the lock is free")
	assert.NoError(t, open(other, name).Unlock(hctx))
	requireNothingOf(t, admin, c.ID(), 10*time.Second)
}

// An acquire whose reply is late is sent again, and the copy sent later can
// be the one that takes the lock: the first copy is still in the network,
// or in a socket buffer Redis has not read yet. The call takes that grant;
// the first copy reaches Redis only after the Unlock here, and takes
// nothing. Without the fence it would take the lock anew, for a hold nobody
// knows of, until its lease (the watchdog's 30 s) ran out.
//
//   - relock sends it again: on go-redis's default client a bounded call
//     runs on a clone that reads for a quarter of the bound at most
//     (clones.go); with go-redis's own retries off, relock sends the
//     request again when that read times out, and takes the grant that
//     answers it by the bound (lockCall.awaitResend) instead of failing
//     there. The hold's final release marks the first copy void. A
//     MultiLock does not take such a grant: its release has no void marks.
//   - go-redis sends it again (MaxRetries, 3 by default) when a read times
//     out: relock does not see it. Every final release of an exclusive
//     lock records the generation it freed, and a copy of the request that
//     started it takes nothing; and a grant whose reply took the read
//     timeout of its client or longer marks its generation void at its
//     final release (copies.go), for every kind.
func TestACopyOfAnAcquireArrivingAfterItsHoldEndedTakesNothing(t *testing.T) {
	kinds := []struct {
		name string
		open func(c *relock.Client, name string) lateLocker
	}{
		{"Lock", func(c *relock.Client, n string) lateLocker { return c.Lock(n) }},
		{"FairLock", func(c *relock.Client, n string) lateLocker { return c.FairLock(n) }},
		{"SpinLock", func(c *relock.Client, n string) lateLocker { return c.SpinLock(n) }},
		{"ReadLock", func(c *relock.Client, n string) lateLocker { return c.RWLock(n).ReadLock() }},
		{"WriteLock", func(c *relock.Client, n string) lateLocker { return c.RWLock(n).WriteLock() }},
		{"Semaphore", func(c *relock.Client, n string) lateLocker { return onePermit{c.Semaphore(n, 1)} }},
		{"MultiLock", func(c *relock.Client, n string) lateLocker {
			return relock.NewMultiLock(c.Lock(n+":a"), c.Lock(n+":b"))
		}},
	}
	// relock sends it again: go-redis's 3 s timeouts, no retries of its
	// own, a deadline of 1 s (a clone with 250 ms reads).
	byRelock := copyMaker{
		opts: func(o *redis.Options) { o.MaxRetries = -1 },
		ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		},
	}
	// go-redis sends it again: its reads end at 200 ms, and the call has no
	// deadline.
	byGoRedis := copyMaker{
		opts: func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond },
		ctx:  func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
	}
	for _, k := range kinds {
		if k.name != "MultiLock" {
			t.Run("ByRelock/"+k.name, func(t *testing.T) {
				t.Parallel()
				copyArrivingLateTakesNothing(t, byRelock, k.name, k.open)
			})
		}
		{
			t.Run("ByGoRedis/"+k.name, func(t *testing.T) {
				t.Parallel()
				copyArrivingLateTakesNothing(t, byGoRedis, k.name, k.open)
			})
		}
	}
}

// copyMaker is how the Client is set up and the call bounded, so that a
// frozen request is sent again.
type copyMaker struct {
	opts func(*redis.Options)
	ctx  func() (context.Context, context.CancelFunc)
}

func copyArrivingLateTakesNothing(t *testing.T, m copyMaker, kind string, open func(*relock.Client, string) lateLocker) {
	name := "copy:" + kind
	srv, p, c := warmClientBehindProxy(t, m.opts, name, open)
	admin := srv.Client()

	// The request goes out on the frozen connection; the copy sent when its
	// read times out goes on a new one.
	p.Freeze()
	ctx, cancel := m.ctx()
	defer cancel()
	hctx, err := open(c, name).Lock(ctx)
	require.NoError(t, err, "the copy was answered within the bound")
	require.NoError(t, hctx.Err())
	require.NoError(t, open(c, name).Unlock(hctx), "Redis held it for the Client")

	thawAndAwait(t, admin, p)
	require.NoError(t, c.Close())
	requireNothingOf(t, admin, c.ID(), 5*time.Second) // a hold it took would keep its 30 s lease
}

// warmClientBehindProxy starts a Redis and a Client of one connection that
// reaches it through a proxy, its go-redis options set by setup, and warms
// it up on the lock name (the connection, the scripts).
func warmClientBehindProxy(t *testing.T, setup func(*redis.Options), name string, open func(*relock.Client, string) lateLocker) (*redistest.Server, *redistest.Proxy, *relock.Client) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	opts := &redis.Options{Addr: p.Addr(), PoolSize: 1}
	setup(opts)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb, relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	hctx, err := open(c, name).Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, open(c, name).Unlock(hctx))
	return srv, p, c
}

// thawAndAwait lets p's frozen traffic through and waits until the frozen
// request has run in Redis (admin).
func thawAndAwait(t *testing.T, admin *redis.Client, p *redistest.Proxy) {
	t.Helper()
	sent := commandCalls(t, admin, "evalsha")
	p.Thaw()
	require.Eventually(t, func() bool { return commandCalls(t, admin, "evalsha") > sent },
		10*time.Second, 5*time.Millisecond, "the frozen request reaches Redis")
}
