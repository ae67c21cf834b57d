package relock_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
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

// Tests of the hold identity: a hold is one generation, each hold context
// one entry.

// Re-acquiring right after the local lease end is a new hold,
// not a replay of the old grant.
func TestReacquireAfterLocalLeaseEndIsANewHold(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	other := relock.New(b.newConn(t))
	t.Cleanup(func() { _ = other.Close() })
	l := c.Lock("relapse")
	owner := relock.NewOwner(context.Background())

	first, err := l.TryLock(owner, 0, 300*time.Millisecond)
	require.NoError(t, err)
	tok1, err := l.Token(first)
	require.NoError(t, err)
	<-first.Done() // the local lease end, a few ms before Redis's
	require.ErrorIs(t, context.Cause(first), relock.ErrLockLost)

	second, err := l.TryLock(owner, 0, 2*time.Second)
	require.NoError(t, err)
	tok2, err := l.Token(second)
	require.NoError(t, err)
	assert.Greater(t, tok2, tok1, "a new hold gets a new token")
	assert.Greater(t, pttl(t, b.rdb, l.Key()), time.Second, "the new hold's lease is in Redis")

	time.Sleep(100 * time.Millisecond) // past the old lease in Redis
	_, err = other.Lock("relapse").TryLock(context.Background(), 0, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained, "the second hold is live: nobody else may get in")
	require.NoError(t, second.Err())
	require.NoError(t, l.Unlock(second))
}

// WithOwner resumes a hold Redis has: it is renewed and leased
// like any other.
func TestWithOwnerResumeTakesOverTheHold(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	old := relock.New(b.newConn(t))
	l := old.Lock("resume")
	octx, err := relock.WithOwner(ctx, "job-7")
	require.NoError(t, err)
	_, err = l.Lock(octx)
	require.NoError(t, err)
	require.NoError(t, old.Close()) // the process "restarts": its lease runs down
	require.NoError(t, b.rdb.PExpire(ctx, l.Key(), 500*time.Millisecond).Err())

	c := b.newClient(t, relock.WithWatchdogLease(900*time.Millisecond))
	rctx, err := relock.WithOwner(ctx, "job-7")
	require.NoError(t, err)
	held, err := c.Lock("resume").Lock(rctx)
	require.NoError(t, err)
	assert.Greater(t, pttl(t, b.rdb, l.Key()), 600*time.Millisecond, "the lease is reset on resume")

	time.Sleep(1500 * time.Millisecond) // past the old lease and the new one: only renewal keeps it
	require.NoError(t, held.Err(), "the resumed hold is renewed")
	n, err := c.Lock("resume").HoldCount(held)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	other := b.newClient(t)
	_, err = other.Lock("resume").TryLock(ctx, 0, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	require.NoError(t, c.Lock("resume").Unlock(held))
}

// A renewal never shortens a longer lease taken by a re-entry.
func TestWatchdogRenewalNeverShortensALongerLease(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t, relock.WithWatchdogLease(time.Second))
	l := c.Lock("long")
	outer, err := l.Lock(context.Background())
	require.NoError(t, err)
	inner, err := l.TryLock(outer, 0, 5*time.Second)
	require.NoError(t, err)
	c.WatchdogTick()
	assert.Greater(t, pttl(t, b.rdb, l.Key()), 4*time.Second)
	require.NoError(t, l.Unlock(inner))
	require.NoError(t, l.Unlock(outer))
}

// Tokens keep increasing across a restart without persistence.
func TestTokensIncreaseAcrossRestartWithoutPersistence(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("reborn")
	var last int64
	for i := range 3 {
		h, err := l.Lock(context.Background())
		require.NoError(t, err)
		tok, err := l.Token(h)
		require.NoError(t, err)
		require.Greater(t, tok, last, "round %d", i)
		last = tok
		require.NoError(t, l.Unlock(h))
		srv.Restart() // no persistence: the tail is gone too
		require.Eventually(t, func() bool { return srv.Client().Ping(context.Background()).Err() == nil },
			5*time.Second, 10*time.Millisecond)
	}
}

// Once a lock is free and its latch has passed, nothing is left.
func TestNothingOutlivesAFreeLock(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t, relock.WithUnlockLatch(200*time.Millisecond))
	for i := range 500 {
		for _, lock := range []interface {
			Lock(context.Context) (context.Context, error)
			Unlock(context.Context) error
		}{c.Lock(fmt.Sprint("order:", i)), c.FairLock(fmt.Sprint("fair:", i)), c.RWLock(fmt.Sprint("rw:", i)).WriteLock()} {
			h, err := lock.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, lock.Unlock(h))
		}
	}
	require.Eventually(t, func() bool { return len(allKeys(t, b.rdb)) == 0 }, 3*time.Second, 20*time.Millisecond,
		"left: %v", allKeys(t, b.rdb))
}

// One Unlock too many on a re-entry changes nothing.
func TestOneUnlockTooManyOnAReentryKeepsTheOuterHold(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	l := c.Lock("twice")
	outer, err := l.Lock(context.Background())
	require.NoError(t, err)
	inner, err := l.Lock(outer)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(inner))
	require.ErrorIs(t, l.Unlock(inner), relock.ErrNotHeld)
	require.NoError(t, outer.Err(), "the outer hold context is live")
	n, err := l.HoldCount(outer)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = b.newClient(t).Lock("twice").TryLock(context.Background(), 0, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	require.NoError(t, l.Unlock(outer))
}

// MultiLock: a second Unlock of a MultiLock context does not
// release the caller's own hold on a part.
func TestMultiLockSecondUnlockKeepsASeparatePartHold(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	a, z := c.Lock("part-a"), c.Lock("part-z")
	own, err := a.Lock(context.Background())
	require.NoError(t, err)
	m := relock.NewMultiLock(a, z)
	mctx, err := m.Lock(own)
	require.NoError(t, err)
	require.NoError(t, m.Unlock(mctx))
	require.ErrorIs(t, m.Unlock(mctx), relock.ErrNotHeld)
	require.NoError(t, own.Err())
	locked, err := a.IsLocked(own)
	require.NoError(t, err)
	assert.True(t, locked, "the separately taken hold on a part stays")
	require.NoError(t, a.Unlock(own))
}

// Unlock ends exactly the context it is given.
func TestUnlockEndsExactlyItsContext(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	l := c.Lock("siblings")
	outer, err := l.Lock(context.Background())
	require.NoError(t, err)
	c1, err := l.Lock(outer)
	require.NoError(t, err)
	c2, err := l.Lock(outer)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(c1))
	require.ErrorIs(t, context.Cause(c1), relock.ErrUnlocked)
	require.NoError(t, c2.Err(), "the sibling re-entry is untouched")
	require.NoError(t, l.Unlock(c2))
	require.NoError(t, outer.Err())
	require.NoError(t, l.Unlock(outer))
	require.ErrorIs(t, context.Cause(outer), relock.ErrUnlocked)
}

// NewOwner gives forked goroutines owners that exclude each
// other, keeping the parent's values and cancellation.
func TestNewOwnerExcludesGoroutinesForkedFromAHold(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	a, l := c.Lock("outer-a"), c.Lock("inner-b")
	type key struct{}
	hold, err := a.Lock(context.WithValue(context.Background(), key{}, "v"))
	require.NoError(t, err)
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ctx := relock.NewOwner(hold)
			assert.Equal(t, "v", ctx.Value(key{}))
			err := l.Do(ctx, func(context.Context) error {
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				return nil
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "one goroutine at a time")
	require.NoError(t, a.Unlock(hold))
}

// Lock returns the parent on error, never nil, and
// the error wraps context.Cause.
func TestLockReturnsTheParentAndTheCauseOnError(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	l := c.Lock("busy")
	h, err := l.Lock(context.Background())
	require.NoError(t, err)
	why := errors.New("request abandoned")
	parent, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(why) })
	got, err := c.Lock("busy").Lock(parent)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	require.ErrorIs(t, err, why)
	require.True(t, got == parent, "Lock returns its parent on error")
	require.NoError(t, l.Unlock(h))

	down := relock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}))
	t.Cleanup(func() { _ = down.Close() })
	_, err = down.Lock("x").TryLock(context.Background(), 0, 0)
	require.ErrorIs(t, err, relock.ErrUnavailable)
}

// The hold context ends with its parent, but that does not
// release the lock: Unlock does.
func TestParentCancellationEndsTheContextNotTheHold(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	l := c.Lock("parent")
	parent, cancel := context.WithCancel(context.Background())
	h, err := l.Lock(parent)
	require.NoError(t, err)
	cancel()
	<-h.Done()
	require.ErrorIs(t, context.Cause(h), context.Canceled)
	locked, err := l.IsLocked(context.Background())
	require.NoError(t, err)
	require.True(t, locked, "the lock stays held until Unlock")
	require.NoError(t, l.Unlock(h))
	locked, err = l.IsLocked(context.Background())
	require.NoError(t, err)
	require.False(t, locked)
}

// Under churn of one owner, with renewals running all the time, no hold is
// declared lost, no renewal fails (counted from the watchdog's own
// warnings), and at the end the registry and Redis are empty. Three rounds,
// since the races it guards against show in about 1 of 3 runs.
func TestChurnWithConstantRenewalsLosesNothing(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint("round", round), churnRound)
	}
}

func churnRound(t *testing.T) {
	b := newReal(t)
	var renewFailed atomic.Int64
	obs := &relock.Observer{Renewed: func(e relock.RenewedEvent) { renewFailed.Add(int64(e.Failed)) }}
	warnings := &relock.CountingHandler{}
	c := b.newClient(t, relock.WithWatchdogLease(300*time.Millisecond), relock.WithObserver(obs),
		relock.WithUnlockLatch(100*time.Millisecond), relock.WithLogger(slog.New(warnings)))
	owner := relock.NewOwner(context.Background())
	stop := time.Now().Add(time.Second)
	var lostHolds atomic.Int64
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			l := c.Lock(fmt.Sprint("churn-", g%3))
			ctx := owner
			if g >= 3 {
				ctx = relock.NewOwner(context.Background())
			}
			for time.Now().Before(stop) {
				h, err := l.Lock(ctx)
				if !assert.NoError(t, err) {
					return
				}
				err = l.Unlock(h)
				if errors.Is(err, relock.ErrLockLost) || errors.Is(context.Cause(h), relock.ErrLockLost) {
					lostHolds.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for time.Now().Before(stop) {
			c.WatchdogTick()
		}
	})
	wg.Wait()
	assert.Zero(t, lostHolds.Load(), "no hold may be declared lost")
	assert.Zero(t, renewFailed.Load(), "no renewal may fail (observer)")
	assert.Zero(t, warnings.CountAtLeast(slog.LevelWarn, "renewal"), "no renewal may fail (watchdog warnings)")
	assert.Zero(t, c.TrackedHolds(), "every hold record is gone")
	require.Eventually(t, func() bool { return len(allKeys(t, b.rdb)) == 0 }, 2*time.Second, 20*time.Millisecond)
}

// A watchdog re-entry of a leased hold is renewed for as long as
// it is held.
func TestWatchdogReentryOfALeasedHoldIsRenewed(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t, relock.WithWatchdogLease(600*time.Millisecond))
	l := c.Lock("mixed")
	outer, err := l.TryLock(context.Background(), 0, 200*time.Millisecond)
	require.NoError(t, err)
	inner, err := l.Lock(context.WithoutCancel(outer))
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, inner.Err(), "the watchdog keeps the re-entry")
	assert.Greater(t, pttl(t, b.rdb, l.Key()), time.Duration(0))
	require.NoError(t, l.Unlock(inner))
	require.NoError(t, l.Unlock(outer))
}

// An Unlock whose release never reached Redis does not keep the
// lock: the hold stops being renewed and the release is retried, so another
// process gets the lock long before the 30 s lease.
func TestFailedUnlockDoesNotKeepTheLock(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	other := relock.New(srv.Client())
	t.Cleanup(func() { _ = other.Close() })

	h, err := c.Lock("stuck").Lock(context.Background())
	require.NoError(t, err)
	proxy.Stall()
	err = c.Lock("stuck").Unlock(h)
	require.Error(t, err)
	require.ErrorIs(t, context.Cause(h), relock.ErrUnlocked, "the hold ended for its holder")
	proxy.Cut() // the release never reaches Redis
	proxy.Unstall()

	start := time.Now()
	got, err := other.Lock("stuck").TryLock(context.Background(), 5*time.Second, 0)
	require.NoError(t, err, "the lock must be released well before its 30 s lease")
	assert.Less(t, time.Since(start), 2*time.Second)
	require.NoError(t, other.Lock("stuck").Unlock(got))
}

// An acquire whose reply was lost leaves no orphan grant.
func TestAcquireOfUnknownOutcomeIsCleanedUp(t *testing.T) {
	srv := redistest.Start(t)
	drop := redistest.NewReplyDropper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
	rdb.AddHook(drop)
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	other := relock.New(srv.Client())
	t.Cleanup(func() { _ = other.Close() })

	require.NoError(t, srv.Client().Ping(context.Background()).Err())
	_, _ = c.Lock("warm").TryLock(context.Background(), 0, time.Second) // loads the script
	drop.Arm("evalsha", 1)
	_, err := c.Lock("orphan").Lock(context.Background())
	require.Error(t, err)
	require.EqualValues(t, 1, drop.Dropped(), "the reply was dropped after the server ran it")

	start := time.Now()
	got, err := other.Lock("orphan").TryLock(context.Background(), 5*time.Second, 0)
	require.NoError(t, err, "the orphan grant must be released, not kept for its 30 s lease")
	assert.Less(t, time.Since(start), 2*time.Second)
	require.NoError(t, other.Lock("orphan").Unlock(got))
}

// A FairLock waiter gets the lock soon after a holder's explicit
// lease ends, every time.
func TestFairLockWaiterGetsTheLockWhenTheLeaseEnds(t *testing.T) {
	b := newReal(t)
	holder := b.newClient(t)
	waiter := b.newClient(t)
	for i := range 15 {
		name := fmt.Sprint("lease-end-", i)
		_, err := holder.FairLock(name).TryLock(context.Background(), 0, 100*time.Millisecond)
		require.NoError(t, err)
		start := time.Now()
		h, err := waiter.FairLock(name).TryLock(context.Background(), 2*time.Second, 0)
		require.NoError(t, err, "trial %d", i)
		assert.Less(t, time.Since(start), 600*time.Millisecond, "trial %d", i)
		require.NoError(t, waiter.FairLock(name).Unlock(h))
	}
}

// A typed nil go-redis client and a nil *Client are errors, not
// panics.
func TestNilClientsAreErrors(t *testing.T) {
	c := relock.New((*redis.Client)(nil))
	require.ErrorIs(t, c.Err(), relock.ErrInvalidArgument)
	_, err := c.Lock("x").Lock(context.Background())
	require.ErrorIs(t, err, relock.ErrInvalidArgument)

	var nilc *relock.Client
	_, err = nilc.Lock("x").Lock(context.Background())
	require.ErrorIs(t, err, relock.ErrInvalidArgument)
	_, err = nilc.FairLock("x").Lock(context.Background())
	require.ErrorIs(t, err, relock.ErrInvalidArgument)
	_, err = nilc.RWLock("x").WriteLock().Lock(context.Background())
	require.ErrorIs(t, err, relock.ErrInvalidArgument)
}

// Do always unlocks and returns fn's error first.
func TestDoUnlocksAndReturnsTheRunsError(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	l := c.Lock("scoped")
	boom := errors.New("boom")
	var seen context.Context
	err := l.Do(context.Background(), func(ctx context.Context) error { seen = ctx; return boom })
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, context.Cause(seen), relock.ErrUnlocked)
	locked, err := l.IsLocked(context.Background())
	require.NoError(t, err)
	require.False(t, locked)
	require.Panics(t, func() {
		_ = l.Do(context.Background(), func(context.Context) error { panic("in fn") })
	})
	locked, err = l.IsLocked(context.Background())
	require.NoError(t, err)
	require.False(t, locked, "a panicking fn still unlocks")
}

// The token's stated limit: tokens follow the server's
// clock above the last token Redis still knows: a clock stepped back by less
// than the unlock latch is covered by the tail; after eviction of the hold
// and the tail, the clock alone orders tokens; and a clock stepped back by
// more than the time Redis forgot is exactly where the promise stops.
func TestTokenClockBound(t *testing.T) {
	b := newMini(t)
	ctx := context.Background()
	c := b.newClient(t)
	l := c.Lock("clock")
	t0 := time.Now()
	b.mini.SetTime(t0)
	take := func() int64 {
		t.Helper()
		h, err := l.Lock(ctx)
		require.NoError(t, err)
		tok, err := l.Token(h)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(h))
		return tok
	}
	first := take()
	assert.InDelta(t, t0.UnixMicro(), first, 1e6, "a token is the server clock in µs")

	b.mini.SetTime(t0.Add(-10 * time.Second)) // stepped back, within the 30 s latch
	second := take()
	assert.Greater(t, second, first, "the tail keeps tokens increasing across a small step back")

	b.mini.SetTime(t0.Add(time.Minute)) // eviction: hold and tail gone, clock moved on
	require.NoError(t, b.rdb.FlushAll(ctx).Err())
	third := take()
	assert.Greater(t, third, second, "after eviction the clock orders tokens")

	b.mini.SetTime(t0.Add(-time.Hour)) // the limit: stepped back further than Redis remembers
	require.NoError(t, b.rdb.FlushAll(ctx).Err())
	assert.Less(t, take(), third, "past the stated clock assumption, tokens can go back")
}

// A Client's id is 22 base64url characters (16 random bytes), not a UUID's
// 36-character text, since it is written about five times per cycle and in
// each latch slot. Whatever writes it, Redis holds "<ID()>:<n>" owners and
// generations, and the id has none of the characters the scripts and
// Cluster hash tags give a meaning to.
func TestClientIDIsCompactAndStartsEveryOwner(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	other := b.newClient(t)
	id := c.ID()
	require.Len(t, id, 22)
	raw, err := base64.RawURLEncoding.DecodeString(id)
	require.NoError(t, err, "the id is base64url")
	require.Len(t, raw, 16)
	assert.False(t, strings.ContainsAny(id, ":~{}"), "id %q", id)
	assert.NotEqual(t, id, other.ID())

	l := c.Lock("compact-id")
	ctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	fields, err := b.rdb.HGetAll(context.Background(), l.Key()).Result()
	require.NoError(t, err)
	owner := ownerField(t, c, ctx)
	require.True(t, strings.HasPrefix(owner, id+":"))
	assert.Equal(t, "1", fields[owner], "the owner's field: %v", fields)
	assert.True(t, strings.HasPrefix(fields["~g"], id+":"), "the generation is one of the Client's op ids: %v", fields)
	require.NoError(t, l.Unlock(ctx))
}
