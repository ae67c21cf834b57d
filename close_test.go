package relock_test

import (
	"context"
	"log/slog"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Close is a graceful shutdown: it releases the Client's holds in Redis, so
// that a waiter in another Client is served at once (the hold's lease is the
// watchdog's 30 s: a waiter that got the lock by the lease would take that
// long). The holder's contexts end with ErrClientClosed, their Unlock (or
// Release) afterwards returns nil, and no loss is logged or observed.
func TestCloseHandsEveryHoldOverAtOnce(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	warnings := &relock.CountingHandler{}
	var lostEvents atomic.Int64
	holder := b.newClient(t, relock.WithLogger(slog.New(warnings)),
		relock.WithObserver(&relock.Observer{Lost: func(relock.LostEvent) { lostEvents.Add(1) }}))
	waiter := b.newClient(t)

	type held struct {
		ctxs    []context.Context
		unlock  func(context.Context) error
		granted <-chan error
	}
	var all []held
	for _, k := range exclusiveKinds {
		name := "close-" + k.name
		own := k.open(holder, name)
		outer, err := own.Lock(ctx)
		require.NoError(t, err)
		inner, err := own.Lock(outer) // a re-entry: Close releases it with the rest
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			h, err := k.open(waiter, name).Lock(ctx)
			if err == nil {
				err = k.open(waiter, name).Unlock(h)
			}
			got <- err
		}()
		require.Eventually(t, func() bool { return k.waiterSubscribed(b.rdb, waiter, name) }, 5*time.Second, 5*time.Millisecond)
		all = append(all, held{[]context.Context{inner, outer}, own.Unlock, got})
	}
	sema := holder.Semaphore("close-sema", 1)
	permit, err := sema.Acquire(ctx, 1)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		s := waiter.Semaphore("close-sema", 1)
		h, err := s.Acquire(ctx, 1)
		if err == nil {
			err = s.Release(h)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		st, err := sema.State(ctx)
		return err == nil && st.Waiters == 1
	}, 5*time.Second, 5*time.Millisecond)
	all = append(all, held{[]context.Context{permit}, sema.Release, got})

	start := time.Now()
	require.NoError(t, holder.Close())
	closed := time.Since(start)
	for i, h := range all {
		select {
		case err := <-h.granted:
			require.NoError(t, err, "waiter %d", i)
		case <-time.After(time.Until(start.Add(closed + 100*time.Millisecond))):
			t.Fatalf("waiter %d was not served within 100 ms of Close (which took %v)", i, closed)
		}
	}
	t.Logf("Close took %v; every waiter served %v after it began", closed, time.Since(start))
	for i, h := range all {
		for _, hctx := range h.ctxs {
			require.ErrorIs(t, context.Cause(hctx), relock.ErrClientClosed, "hold %d", i)
			require.NoError(t, h.unlock(hctx), "an Unlock after Close has nothing left to do (hold %d)", i)
		}
	}
	require.Zero(t, warnings.CountAtLeast(slog.LevelWarn, "lost"), "no loss logged for holds Close ended itself")
	require.Zero(t, lostEvents.Load(), "no Lost event for holds Close ended itself")
	require.Eventually(t, func() bool {
		keys, err := b.rdb.Keys(ctx, "*").Result()
		if err != nil {
			return false
		}
		for _, k := range keys {
			if b.rdb.PTTL(ctx, k).Val() < 0 {
				return false
			}
		}
		return true
	}, 2*time.Second, 10*time.Millisecond, "nothing held is left in Redis")
}

// Close on a hung Redis is bounded by the unlock timeout: it cannot confirm
// the releases, so the holds are left to their leases, their contexts end
// with ErrClientClosed (a loss, reported as such), and a deferred Unlock
// still releases them once Redis answers again.
func TestCloseOnAHungRedisIsBoundedAndLeavesUnlockToRelease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	c := relock.New(rdb, relock.WithUnlockTimeout(300*time.Millisecond))
	l := c.Lock("close-hung")
	hctx, err := l.Lock(ctx)
	require.NoError(t, err)

	// The subscriber's connection (dialed at the first hold) is up: what
	// Close cannot confirm here is the release.
	presence := "relock:client:" + c.ID()
	require.Eventually(t, func() bool { return rdb.PubSubNumSub(ctx, presence).Val()[presence] == 1 }, 5*time.Second, 5*time.Millisecond)
	srv.Pause()
	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	srv.Resume()
	require.Less(t, took, 2*time.Second, "Close is bounded by the unlock timeout (300 ms), not go-redis's timeouts")
	require.ErrorIs(t, context.Cause(hctx), relock.ErrClientClosed)
	require.NoError(t, l.Unlock(hctx), "the deferred Unlock releases what Close could not")
	require.Empty(t, hgetall(t, rdb, l.Key()))
}

// Close is bounded by the unlock timeout also while the subscriber is
// opening its connection to a Redis that accepts it and never answers: the
// hold is released through the commands' connection, and the subscriber's
// attempt is left to go-redis's timeouts.
func TestCloseIsBoundedWhileTheSubscriberDialsAHungRedis(t *testing.T) {
	srv := redistest.Start(t)
	hung, accepted := hungListener(t)
	var toHung atomic.Bool
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr(),
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if toHung.Load() {
				addr = hung
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	c := relock.New(rdb, relock.WithUnlockTimeout(300*time.Millisecond), relock.WithLogger(quietLogger()))
	// The commands' connections, to Redis, dialed and set up before the
	// cut: the Lock, the name record written at the first hold and Close's
	// release may each need one at once. (Not MinIdleConns: the pool would
	// dial replacements after the cut, to the hung listener, and hand one
	// to a command.)
	conns := make([]*redis.Conn, 4)
	for i := range conns {
		conns[i] = rdb.Conn()
		require.NoError(t, conns[i].Ping(ctx).Err())
	}
	for _, cn := range conns {
		require.NoError(t, cn.Close())
	}
	require.Equal(t, uint32(len(conns)), rdb.PoolStats().IdleConns)
	toHung.Store(true) // every later connection: the subscriber's
	l := c.Lock("close-dial")
	hctx, err := l.Lock(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return accepted.Load() > 0 }, 5*time.Second, time.Millisecond,
		"the first hold starts the subscriber")

	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	require.Less(t, took, time.Second, "Close is bounded by the unlock timeout (300 ms), not go-redis's read timeout (3 s)")
	require.ErrorIs(t, context.Cause(hctx), relock.ErrClientClosed)
	require.Empty(t, hgetall(t, srv.Client(), l.Key()), "Close released the hold")
}

// Close is bounded by the unlock timeout also while the Client settles, in
// the background, an acquire cut short on a Redis that never answers: the
// settling goroutine ends when go-redis's read timeout ends the request.
func TestCloseIsBoundedWhileACutShortAcquireSettles(t *testing.T) {
	hung, _ := hungListener(t)
	rdb := redis.NewClient(&redis.Options{Addr: hung})
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb, relock.WithUnlockTimeout(300*time.Millisecond), relock.WithLogger(quietLogger()))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Lock("close-settle").Lock(ctx)
	require.ErrorIs(t, err, relock.ErrNotObtained)

	start := time.Now()
	require.NoError(t, c.Close())
	require.Less(t, time.Since(start), time.Second, "Close is bounded by the unlock timeout (300 ms), not go-redis's read timeouts (3 s, retried)")
}

// Close ends its holds' contexts before it releases them in Redis, for
// every kind: a waiter elsewhere whom the release serves never acquires
// while the closing holder may still believe it holds. The closing
// Client's replies are delayed 300 ms, so that its release has run in Redis
// (and served the waiter) long before the reply is back.
func TestCloseEndsHoldContextsBeforeTheReleaseServesAWaiter(t *testing.T) {
	srv := redistest.Start(t)
	for _, k := range contractKinds {
		if k.name == "CountDownLatch" || k.name == "ReadLock" { // no hold a waiter waits out
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			faults := redistest.NewConnFaults()
			rdbA := srv.Client()
			rdbA.AddHook(faults)
			a := relock.New(rdbA)
			waiting := make(chan struct{}, 1)
			b := relock.New(srv.Client(), relock.WithObserver(&relock.Observer{
				WaitStarted: func(context.Context, relock.LockInfo) {
					select {
					case waiting <- struct{}{}:
					default:
					}
				},
			}))
			t.Cleanup(func() { _ = b.Close() })
			open := k.open
			if k.one != nil {
				open = k.one
			}
			name := "close-first:" + k.name
			heldA := hold(t, open(a, name))
			vB := open(b, name)
			got := make(chan callResult, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				got <- contractCall(vB, blockingAcquire(vB), ctx, 0, 0)
			}()
			select {
			case <-waiting:
			case <-time.After(5 * time.Second):
				t.Fatal("the other Client's acquire never waited")
			}
			faults.SetDelay(redistest.CommandConn, 300*time.Millisecond)
			go func() { _ = a.Close() }()
			r := <-got
			require.NoError(t, r.err)
			assert.Error(t, heldA.Err(), "the closing holder's context had ended when the waiter acquired")
			assert.ErrorIs(t, context.Cause(heldA), relock.ErrClientClosed)
			require.NoError(t, release(vB, r.hctx))
		})
	}
}

// blockingAcquire is the name of v's acquire that waits: Lock, or a
// Semaphore's Acquire.
func blockingAcquire(v any) string {
	if reflect.ValueOf(v).MethodByName("Lock").IsValid() {
		return "Lock"
	}
	return "Acquire"
}

// A release that failed and is being retried in the background gets one
// last attempt at Close, within Close's bound, instead of leaving its hold
// to its lease: Close hands everything the Client held back at once.
func TestCloseMakesALastAttemptAtAFailedUnlocksRelease(t *testing.T) {
	srv := redistest.Start(t)
	faults := redistest.NewConnFaults()
	rdbA := srv.Client()
	rdbA.AddHook(faults)
	a := relock.New(rdbA)
	b := relock.New(srv.Client())
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	held, err := a.Lock("last-attempt").Lock(ctx)
	require.NoError(t, err)
	faults.CutBefore(redistest.CommandConn, "EVALSHA", 1000)
	err = a.Lock("last-attempt").Unlock(held)
	require.ErrorIs(t, err, relock.ErrNotConfirmed)
	// The Unlock's release and a background retry have failed; the next
	// retry waits out its backoff.
	require.Eventually(t, func() bool { return faults.Cuts() >= 2 }, 5*time.Second, time.Millisecond)
	faults.StopCutting()
	require.NoError(t, a.Close())
	_, err = b.Lock("last-attempt").TryLock(ctx, 0, 0)
	require.NoError(t, err, "the lock is free once Close has returned, not at the end of its 30 s lease")
}

// Close waits, within its bound, for a Lock whose request is in flight:
// the closing Client's replies are delayed 300 ms, so that its acquire has
// run in Redis when Close begins and its reply is still out. Once Close
// has returned, what the acquire took is released in Redis, for every
// exclusive kind and a MultiLock's parts: a process that ends right after
// Close leaves nothing held for a lease (fault schedule multi/931003).
func TestCloseSettlesAnAcquireInFlight(t *testing.T) {
	srv := redistest.Start(t)
	check := srv.Client()
	type subject struct {
		name string
		open func(c *relock.Client) interface {
			TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
		}
		keys    []string
		holders func(testing.TB, map[string]string) map[string]string
	}
	var subjects []subject
	for _, k := range exclusiveKinds {
		name := "close-in-flight:" + k.name
		subjects = append(subjects, subject{k.name, func(c *relock.Client) interface {
			TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
		} {
			return k.open(c, name)
		}, []string{k.keyOf(relock.New(check), name)}, k.holders})
	}
	subjects = append(subjects, subject{"MultiLock", func(c *relock.Client) interface {
		TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	} {
		return relock.NewMultiLock(c.Lock("close-in-flight:A"), c.Lock("close-in-flight:B"))
	}, []string{"relock:{close-in-flight:A}", "relock:{close-in-flight:B}"}, ownersOf})
	for _, s := range subjects {
		t.Run(s.name, func(t *testing.T) {
			faults := redistest.NewConnFaults()
			rdb := srv.Client()
			rdb.AddHook(faults)
			a := relock.New(rdb, relock.WithLogger(quietLogger()))
			l := s.open(a)
			held := func() int {
				n := 0
				for _, key := range s.keys {
					n += len(s.holders(t, check.HGetAll(context.Background(), key).Val()))
				}
				return n
			}
			faults.SetDelay(redistest.CommandConn, 300*time.Millisecond)
			got := make(chan error, 1)
			go func() {
				_, err := l.TryLock(context.Background(), 10*time.Second, 0)
				got <- err
			}()
			require.Eventually(t, func() bool { return held() == len(s.keys) }, 5*time.Second, time.Millisecond,
				"the acquire has run in Redis")

			start := time.Now()
			require.NoError(t, a.Close())
			took := time.Since(start)
			assert.Zero(t, held(), "nothing the acquire took is left held once Close has returned")
			assert.Less(t, took, time.Second+boundSlack, "Close is bounded by its unlock timeout")
			err := <-got
			require.ErrorIs(t, err, relock.ErrNotObtained)
			assert.ErrorIs(t, err, relock.ErrClientClosed)
			t.Logf("Close took %v; TryLock: %v", took, err)
		})
	}
}
