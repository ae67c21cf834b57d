package relock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// scriptHook is a go-redis hook that watches the EVALSHA calls of a client:
// after is called once each completes (with its number of keys, which tells
// the scripts of a test apart), and gate, when set, runs before one is sent
// and may block it. Install it after any ConnFaults, so that gate runs
// before the fault hook sees the write.
type scriptHook struct {
	relock.PassHook
	after func(numKeys, numArgs int)
	gate  func(numKeys, numArgs int)
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "evalsha" {
			return next(ctx, cmd)
		}
		n, argc := 0, 0
		if args := cmd.Args(); len(args) > 2 {
			n, _ = strconv.Atoi(toString(args[2]))
			argc = len(args) - 3 - n
		}
		if h.gate != nil {
			h.gate(n, argc)
		}
		err := next(ctx, cmd)
		if h.after != nil {
			h.after(n, argc)
		}
		return err
	}
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// faultyServer is a redis-server with a go-redis client whose connections
// take faults.
type faultyServer struct {
	srv    *redistest.Server
	rdb    *redis.Client
	faults *redistest.ConnFaults
}

func startFaulty(t *testing.T) faultyServer {
	srv := redistest.Start(t)
	rdb := srv.Client()
	f := redistest.NewConnFaults()
	rdb.AddHook(f)
	return faultyServer{srv: srv, rdb: rdb, faults: f}
}

// The first group of a MultiLock is granted, the second is
// busy, and the link to the first group's Redis is cut just before the
// rollback's release is sent. TryLock reports the failure, and the part it
// took must not stay held for its lease: the rollback hands the release to
// the background clean-up, which frees it as soon as the link is back.
func TestMultiLockRollbackCutFromItsRedisIsRetriedInTheBackground(t *testing.T) {
	var srvs [2]faultyServer
	var clients [2]*relock.Client
	for i := range srvs {
		srvs[i] = startFaulty(t)
		clients[i] = relock.New(srvs[i].rdb)
		c := clients[i]
		t.Cleanup(func() { _ = c.Close() })
	}
	m := relock.NewMultiLock(clients[0].Lock("a"), clients[1].Lock("b"))
	first := 0
	if m.Locks()[0].Name() == "b" {
		first = 1
	}
	second := 1 - first
	warm, err := m.Lock(context.Background()) // the servers learn the scripts
	require.NoError(t, err)
	require.NoError(t, m.Unlock(warm))

	other := relock.New(srvs[second].srv.Client())
	t.Cleanup(func() { _ = other.Close() })
	busyName := m.Locks()[1].Name()
	octx, err := other.Lock(busyName).Lock(context.Background())
	require.NoError(t, err)

	// Once the first group's acquire has run, the next script sent to its
	// Redis — the rollback's release — finds the link cut.
	var armed atomic.Bool
	armed.Store(true)
	srvs[first].rdb.AddHook(&scriptHook{after: func(int, int) {
		if armed.CompareAndSwap(true, false) {
			srvs[first].faults.CutBefore(redistest.CommandConn, "EVALSHA", 1)
		}
	}})
	start := time.Now()
	_, err = m.TryLock(context.Background(), 0, 0)
	require.Error(t, err)
	assert.ErrorIs(t, err, redistest.ErrCut, "the failed rollback is reported")
	require.Equal(t, 1, srvs[first].faults.Cuts(), "the rollback's release was cut")

	// The watchdog lease is 30 s: a part left to it would be held that
	// long. The background retry's first pause is tens of milliseconds.
	require.Eventually(t, func() bool { return len(lockKeys(t, srvs[first].srv)) == 0 }, 5*time.Second, 5*time.Millisecond,
		"the part taken before the busy one is freed in the background, not left to its lease")
	t.Logf("part freed %v after TryLock began", time.Since(start))
	assert.Zero(t, clients[0].TrackedHolds())
	assert.Zero(t, clients[1].TrackedHolds())
	assertHeldBy(t, srvs[second].rdb, "relock:{"+busyName+"}", ownerField(t, other, octx), 1)
}

// Item 4's rule for RedLock: a round that fails is undone on every master;
// an undo that cannot reach a master that granted is retried there in the
// background instead of leaving that master's grant to its lease.
func TestRedLockUndoCutFromAMasterIsRetriedInTheBackground(t *testing.T) {
	var srvs [3]faultyServer
	var clients []*relock.Client
	for i := range srvs {
		srvs[i] = startFaulty(t)
		c := relock.New(srvs[i].rdb)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	r := relock.NewRedLock("x", clients)
	warm, err := r.Lock(context.Background()) // every master learns the scripts
	require.NoError(t, err)
	require.NoError(t, r.Unlock(warm))

	// Two masters are held by someone else: only master 0 grants, and the
	// round must be undone.
	for i := 1; i < 3; i++ {
		other := relock.New(srvs[i].srv.Client())
		t.Cleanup(func() { _ = other.Close() })
		_, err := other.Lock("x").Lock(context.Background())
		require.NoError(t, err)
	}
	var armed atomic.Bool
	armed.Store(true)
	srvs[0].rdb.AddHook(&scriptHook{after: func(int, int) {
		if armed.CompareAndSwap(true, false) {
			srvs[0].faults.CutBefore(redistest.CommandConn, "EVALSHA", 1)
		}
	}})
	_, err = r.TryLock(context.Background(), 0, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	require.Equal(t, 1, srvs[0].faults.Cuts(), "the undo on master 0 was cut")
	require.Eventually(t, func() bool { return len(lockKeys(t, srvs[0].srv)) == 0 }, 5*time.Second, 5*time.Millisecond,
		"master 0's grant is undone in the background, not left to its lease")
}

// ForceUnlock's release hands the lock to a waiter of the
// same Client, whose grant (on the subscriber) arrives before the force
// release's reply (delayed on the command connection). ForceUnlock must end
// only the hold it removed, not the one Redis granted after it.
func TestForceUnlockSparesTheHoldItHandsToItsOwnClientsWaiter(t *testing.T) {
	fs := startFaulty(t)
	c := relock.New(fs.rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("x")
	spy := fs.srv.Client()
	for run := range 3 {
		fs.faults.SetDelay(redistest.CommandConn, 0)
		hctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		type result struct {
			ctx context.Context
			err error
		}
		got := make(chan result, 1)
		go func() {
			ctx, err := l.Lock(context.Background())
			got <- result{ctx, err}
		}()
		require.Eventually(t, func() bool {
			q, _ := spy.HGet(context.Background(), "relock:{x}", "~q").Result()
			return q != ""
		}, 5*time.Second, time.Millisecond, "the waiter queues in Redis")

		fs.faults.SetDelay(redistest.CommandConn, 100*time.Millisecond)
		freed, err := l.ForceUnlock(context.Background())
		require.NoError(t, err)
		require.True(t, freed)
		require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost, "the forced hold ends")

		var w result
		select {
		case w = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not handed the lock")
		}
		fs.faults.SetDelay(redistest.CommandConn, 0)
		require.NoError(t, w.err)
		require.NoError(t, context.Cause(w.ctx), "run %d: the hold Redis granted after the force release is live", run)
		assertHeldBy(t, spy, "relock:{x}", ownerField(t, c, w.ctx), 1)
		require.NoError(t, l.Unlock(w.ctx), "run %d", run)
		require.Empty(t, lockKeys(t, fs.srv), "run %d: nothing held", run)
	}
}

// Close while a Lock's grant is on its way back (its reply
// delayed). The Lock completes after Close returned: it must fail with
// ErrClientClosed and leave nothing held, and Close must not wait for it.
// A MultiLock's grant is taken back part by part.
func TestLockCompletingAfterCloseFailsAndHoldsNothing(t *testing.T) {
	kinds := map[string]func(c *relock.Client) locker{
		"Lock":      func(c *relock.Client) locker { return c.Lock("x") },
		"MultiLock": func(c *relock.Client) locker { return relock.NewMultiLock(c.Lock("x"), c.Lock("y")) },
	}
	for name, newLocker := range kinds {
		t.Run(name, func(t *testing.T) { testLockCompletingAfterClose(t, newLocker) })
	}
}

// locker is what Lock and MultiLock share.
type locker interface {
	Lock(ctx context.Context) (context.Context, error)
	Unlock(ctx context.Context) error
}

func testLockCompletingAfterClose(t *testing.T, newLocker func(c *relock.Client) locker) {
	fs := startFaulty(t)
	c := relock.New(fs.rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := newLocker(c)
	warm, err := l.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(warm))
	spy := fs.srv.Client()
	// The first hold opens the Client's presence subscription: let it
	// settle, so that the delay below slows only the Lock.
	require.Eventually(t, func() bool { return strings.Contains(spy.ClientList(context.Background()).Val(), " sub=1 ") },
		5*time.Second, time.Millisecond)

	// The reply comes a second after the grant: room for Close to return
	// first however loaded the machine is, and far above Close's bound.
	fs.faults.SetDelay(redistest.CommandConn, time.Second)
	type result struct {
		ctx context.Context
		err error
	}
	got := make(chan result, 1)
	go func() {
		ctx, err := l.Lock(context.Background())
		got <- result{ctx, err}
	}()
	// The warm-up's free record keeps the key: the grant is its ~g field.
	require.Eventually(t, func() bool { return spy.HExists(context.Background(), "relock:{x}", "~g").Val() },
		5*time.Second, time.Millisecond, "Redis granted the lock")
	start := time.Now()
	require.NoError(t, c.Close())
	closeTook := time.Since(start)
	select {
	case r := <-got:
		t.Fatalf("Lock returned (%v) before Close did (Close took %v): the scenario needs it later", r.err, closeTook)
	default:
	}
	r := <-got
	assert.Less(t, closeTook, 500*time.Millisecond, "Close does not wait for a Lock in flight")
	require.ErrorIs(t, r.err, relock.ErrClientClosed)
	// The failed Lock's own clean-up (its waiter leaving the queue) may
	// still be in flight on the slowed connection: its record goes once
	// that has returned.
	assert.Eventually(t, func() bool { return c.TrackedHolds() == 0 }, 5*time.Second, time.Millisecond)
	assert.Empty(t, lockKeys(t, fs.srv), "the grant that came back after Close is released")
}

// A read Unlock whose release is cut (its background retry
// held back) leaves the owner's read hold in Redis, which this Client no
// longer holds. The same owner's WriteLock then takes that leftover over
// instead of failing with ErrUpgrade; an owner that does hold the read lock
// still gets ErrUpgrade.
func TestLeftoverReadHoldDoesNotBlockTheSameOwnersWriteLock(t *testing.T) {
	fs := startFaulty(t)
	// rw_release has 4 keys and 9 arguments: once armed, the first is let
	// through (and cut), the background retries wait for the gate.
	gate := make(chan struct{})
	var releases, retried atomic.Int32
	var armed atomic.Bool // counting from the release that is cut
	var once sync.Once
	fs.rdb.AddHook(&scriptHook{
		gate: func(n, argc int) {
			if n == 4 && argc == 9 && armed.Load() && releases.Add(1) > 1 {
				<-gate
			}
		},
		after: func(n, argc int) {
			if n == 4 && argc == 9 && armed.Load() && releases.Load() > 1 {
				retried.Add(1)
			}
		},
	})
	c := relock.New(fs.rdb)
	t.Cleanup(func() {
		once.Do(func() { close(gate) })
		_ = c.Close()
	})
	rw := c.RWLock("x")
	warm, err := rw.ReadLock().Lock(context.Background()) // Redis learns the scripts
	require.NoError(t, err)
	require.NoError(t, rw.ReadLock().Unlock(warm)) // release 1
	wwarm, err := rw.WriteLock().Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, rw.WriteLock().Unlock(wwarm)) // release 2

	rctx, err := rw.ReadLock().Lock(context.Background())
	require.NoError(t, err)
	owner := ownerField(t, c, rctx)
	fs.faults.CutBefore(redistest.CommandConn, "EVALSHA", 1)
	armed.Store(true)
	require.ErrorIs(t, rw.ReadLock().Unlock(rctx), redistest.ErrCut) // release 3: cut, retried later
	require.Equal(t, "1", hgetall(t, fs.srv.Client(), "relock:{x}:rw")["r:"+owner], "the read hold is left in Redis")

	wctx, err := rw.WriteLock().TryLock(context.WithoutCancel(rctx), 0, 0)
	require.NoError(t, err, "the owner's own leftover read hold does not block its write lock")
	require.NoError(t, context.Cause(wctx))
	h := hgetall(t, fs.srv.Client(), "relock:{x}:rw")
	assert.Equal(t, "1", h["w:"+owner], "write hold: %v", h)
	assert.NotContains(t, h, "r:"+owner, "the leftover was taken over: %v", h)

	// The background retry of the read release now runs: it finds its
	// generation gone and changes nothing.
	once.Do(func() { close(gate) })
	require.Eventually(t, func() bool { return retried.Load() > 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, context.Cause(wctx))
	assert.Equal(t, "1", hgetall(t, fs.srv.Client(), "relock:{x}:rw")["w:"+owner], "the write hold stays")
	require.NoError(t, rw.WriteLock().Unlock(wctx))
	assert.Empty(t, lockKeys(t, fs.srv))

	assertUpgradeRefused(t, fs.srv.Client(), rw)
}

// assertUpgradeRefused checks that an owner that holds rw's read lock gets
// ErrUpgrade from its write lock, changing nothing in Redis.
func assertUpgradeRefused(t *testing.T, spy redis.UniversalClient, rw *relock.RWLock) {
	t.Helper()
	rctx, err := rw.ReadLock().Lock(context.Background())
	require.NoError(t, err)
	before := hgetall(t, spy, rw.Key())
	_, err = rw.WriteLock().TryLock(rctx, 0, 0)
	require.ErrorIs(t, err, relock.ErrUpgrade)
	assert.Equal(t, before, hgetall(t, spy, rw.Key()))
	require.NoError(t, rw.ReadLock().Unlock(rctx))
}
