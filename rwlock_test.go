package relock_test

import (
	"context"
	"errors"
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

// writersQueued is how many writers wait in the queue of l: the entries of
// the sorted set beside its hash from the head its mark (~q) names on,
// which must be as many as the mark counts (see rw_common.lua).
func writersQueued(t testing.TB, rdb redis.UniversalClient, l *relock.RWLock) int {
	t.Helper()
	ctx := context.Background()
	// The mark and the queue in one MULTI: a writer may queue meanwhile.
	var mark *redis.StringCmd
	var queue *redis.ZSliceCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		mark = p.HGet(ctx, l.Key(), "~q")
		queue = p.ZRangeWithScores(ctx, l.Key()+":q", 0, -1)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	f := strings.Fields(mark.Val())
	require.Len(t, f, 4, "~q of %s is %q", l.Key(), mark.Val())
	head, err := strconv.ParseFloat(f[2], 64)
	require.NoError(t, err)
	n := 0
	for _, z := range queue.Val() {
		if z.Score >= head {
			n++
		}
	}
	require.Equal(t, f[3], strconv.Itoa(n), "the count in the mark %q", mark.Val())
	return n
}

// holders returns the count fields of an RWLock's hash: "r:<owner>" and
// "w:<owner>" → count, leaving out (after checking they are there) each
// holder's deadline, generation and last-op fields ("rd:", "rg:", "ro:",
// and "wd:", "wg:", "wo:") and the write hold's token "~t".
func holders(t testing.TB, b *backend, l *relock.RWLock) map[string]string {
	t.Helper()
	hash := hgetall(t, b.rdb, l.Key())
	out := map[string]string{}
	for f, v := range hash {
		kind, owner, _ := strings.Cut(f, ":")
		if kind != "r" && kind != "w" {
			continue
		}
		out[f] = v
		for _, meta := range []string{"d:", "g:", "o:"} {
			assert.NotEmpty(t, hash[kind+meta+owner], "field %s of a holder: %v", kind+meta+owner, hash)
		}
		if kind == "w" {
			assert.NotEmpty(t, hash["~t"], "the write hold's token: %v", hash)
		}
	}
	return out
}

func TestRWLockReadersOverlap(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c1 := b.newClient(t)
		c2 := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = c2.Close() })
		bg := context.Background()
		l1, l2 := c1.RWLock("rw:overlap"), c2.RWLock("rw:overlap")

		r1, err := l1.ReadLock().Lock(bg)
		require.NoError(t, err)
		r2, err := l2.ReadLock().TryLock(bg, 0, 0)
		require.NoError(t, err, "a second reader gets in at once")
		assert.Equal(t, map[string]string{
			"r:" + ownerField(t, c1, r1): "1",
			"r:" + ownerField(t, c2, r2): "1",
		}, holders(t, b, l1), "two readers hold at once")
		assert.Greater(t, pttl(t, b.rdb, l1.Key()), 25*time.Second)
		locked, err := l1.ReadLock().IsLocked(bg)
		require.NoError(t, err)
		assert.True(t, locked)
		locked, err = l1.WriteLock().IsLocked(bg)
		require.NoError(t, err)
		assert.False(t, locked)
		_, err = l1.WriteLock().TryLock(bg, 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained, "no writer while reading")

		inner, err := l1.ReadLock().Lock(r1)
		require.NoError(t, err)
		n, err := l1.ReadLock().HoldCount(inner)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		n, err = l1.WriteLock().HoldCount(inner)
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		require.NoError(t, l1.ReadLock().Unlock(inner))
		require.NoError(t, l1.ReadLock().Unlock(r1))
		require.NoError(t, l2.ReadLock().Unlock(r2))
		assert.Empty(t, keysLeft(t, b.rdb))
		assert.Equal(t, 0, c1.TrackedHolds())
	})
}

// Many goroutines over two Clients read and write: a writer never overlaps
// anyone. The unsynchronised `shared` also lets the race detector see any
// overlap of a writer with a reader.
func TestRWLockWriterExcludesEveryone(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		clients := []*relock.Client{b.newClient(t), relock.New(b.newConn(t))}
		t.Cleanup(func() { _ = clients[1].Close() })
		const goroutines, rounds = 8, 15
		var readers, writers, maxReaders atomic.Int32
		shared := 0
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := clients[g%2].RWLock("rw:excl")
				for i := range rounds {
					if (g+i)%3 == 0 {
						ctx, err := l.WriteLock().Lock(context.Background())
						if !assert.NoError(t, err) {
							return
						}
						assert.Equal(t, int32(1), writers.Add(1))
						assert.Equal(t, int32(0), readers.Load())
						shared++
						time.Sleep(time.Millisecond) // the work under the lock, long enough for others to try
						assert.Equal(t, int32(0), readers.Load())
						writers.Add(-1)
						assert.NoError(t, l.WriteLock().Unlock(ctx))
						continue
					}
					ctx, err := l.ReadLock().Lock(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					n := readers.Add(1)
					if n > maxReaders.Load() {
						maxReaders.Store(n)
					}
					assert.Equal(t, int32(0), writers.Load())
					_ = shared
					time.Sleep(time.Millisecond)
					assert.Equal(t, int32(0), writers.Load())
					readers.Add(-1)
					assert.NoError(t, l.ReadLock().Unlock(ctx))
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, goroutines*rounds/3, shared)
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

func TestRWLockDowngrade(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.RWLock("rw:down")
		w, err := l.WriteLock().Lock(bg)
		require.NoError(t, err)
		tok, err := l.WriteLock().Token(w)
		require.NoError(t, err)
		assert.Positive(t, tok)
		assert.Equal(t, tok, storedToken(t, b.rdb, l.Key()))
		_, err = l.ReadLock().TryLock(bg, 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained, "another owner cannot read under a writer")

		// The read hold's context derives from the one passed: detached from
		// w's cancellation (keeping its owner), it outlives the write hold.
		r, err := l.ReadLock().TryLock(context.WithoutCancel(w), 0, 0)
		require.NoError(t, err, "the writer may read")
		owner := ownerField(t, c, w)
		assert.Equal(t, map[string]string{"w:" + owner: "1", "r:" + owner: "1"}, holders(t, b, l))
		require.NoError(t, l.WriteLock().Unlock(w))
		assert.Equal(t, map[string]string{"r:" + owner: "1"}, holders(t, b, l), "downgraded")
		require.NoError(t, r.Err(), "the read hold outlives the write hold")

		other, err := l.ReadLock().TryLock(bg, 0, 0)
		require.NoError(t, err, "readers join once the write hold is gone")
		_, err = l.WriteLock().TryLock(bg, 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.NoError(t, l.ReadLock().Unlock(other))
		require.NoError(t, l.ReadLock().Unlock(r))
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

func TestRWLockUpgradeIsAnError(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.RWLock("rw:up")
		r, err := l.ReadLock().Lock(bg)
		require.NoError(t, err)
		before := hgetall(t, b.rdb, l.Key())
		_, err = l.WriteLock().Lock(r)
		require.ErrorIs(t, err, relock.ErrUpgrade)
		assert.Equal(t, before, hgetall(t, b.rdb, l.Key()))

		// The same owner from another process, which does not know of the
		// read hold: Redis refuses it.
		octx, err := relock.WithOwner(bg, "shared-owner")
		require.NoError(t, err)
		r2, err := l.ReadLock().Lock(octx)
		require.NoError(t, err)
		c2 := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = c2.Close() })
		before = hgetall(t, b.rdb, l.Key())
		_, err = c2.RWLock("rw:up").WriteLock().TryLock(octx, time.Second, 0)
		require.ErrorIs(t, err, relock.ErrUpgrade)
		assert.Equal(t, before, hgetall(t, b.rdb, l.Key()))
		assert.Zero(t, writersQueued(t, b.rdb, l), "no claim left behind")

		require.NoError(t, l.ReadLock().Unlock(r2))
		require.NoError(t, l.ReadLock().Unlock(r))
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

func TestRWLockMisuseIsNotHeldAndChangesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.RWLock("rw:misuse")
		r, err := l.ReadLock().Lock(bg)
		require.NoError(t, err)
		before := hgetall(t, b.rdb, l.Key())
		assert.ErrorIs(t, l.WriteLock().Unlock(r), relock.ErrNotHeld, "write-unlock by a reader")
		assert.ErrorIs(t, l.ReadLock().Unlock(bg), relock.ErrNotHeld, "read-unlock by a context that never locked")
		require.NoError(t, l.ReadLock().Unlock(r))
		w, err := l.WriteLock().Lock(bg)
		require.NoError(t, err)
		wBefore := hgetall(t, b.rdb, l.Key())
		assert.ErrorIs(t, l.ReadLock().Unlock(w), relock.ErrNotHeld, "read-unlock by the writer without a read hold")
		assert.ErrorIs(t, l.ReadLock().Unlock(r), relock.ErrNotHeld, "read-unlock once too often")
		assert.Equal(t, wBefore, hgetall(t, b.rdb, l.Key()))
		assert.NotEqual(t, before, wBefore)
		require.NoError(t, l.WriteLock().Unlock(w))
		assert.ErrorIs(t, l.WriteLock().Unlock(w), relock.ErrNotHeld)
		_, err = l.WriteLock().Token(r)
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

// A writer gets in while 8 goroutines keep taking read locks that overlap:
// once it waits, new readers queue behind it.
func TestRWLockWriterIsNotStarvedByReaders(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.RWLock("rw:starve")
		stop := make(chan struct{})
		var inside atomic.Int32
		var reads atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, err := l.ReadLock().Lock(bg)
					if !assert.NoError(t, err) {
						return
					}
					inside.Add(1)
					reads.Add(1)
					time.Sleep(time.Millisecond) // work under the lock keeps readers overlapping
					inside.Add(-1)
					assert.NoError(t, l.ReadLock().Unlock(ctx))
				}
			}()
		}
		// Readers overlap all the time: there is never a free moment.
		require.Eventually(t, func() bool { return reads.Load() > 50 }, 10*time.Second, time.Millisecond)
		w, err := l.WriteLock().TryLock(bg, 10*time.Second, 0)
		require.NoError(t, err, "the writer starved")
		assert.Equal(t, int32(0), inside.Load(), "no reader inside with the writer")
		held := reads.Load()
		time.Sleep(5 * time.Millisecond) // readers try meanwhile
		assert.Equal(t, held, reads.Load(), "no reader got in under the writer")
		assert.Zero(t, writersQueued(t, b.rdb, l), "the writer's claim is gone once it holds")
		require.NoError(t, l.WriteLock().Unlock(w))
		require.Eventually(t, func() bool { return reads.Load() > held }, 5*time.Second, time.Millisecond,
			"the write unlock lets readers go on")
		close(stop)
		wg.Wait()
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

// A write unlock wakes every waiting reader: all of them get in together.
func TestRWLockWriteUnlockWakesAllReaders(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.RWLock("rw:wakeall")
		w, err := l.WriteLock().Lock(bg)
		require.NoError(t, err)
		const n = 4
		got := make(chan context.Context, n)
		for range n {
			go func() {
				ctx, err := l.ReadLock().Lock(bg)
				assert.NoError(t, err)
				got <- ctx
			}()
		}
		// They all sleep on the one readers' channel.
		require.Eventually(t, func() bool {
			return b.rdb.PubSubNumSub(bg, "relock:{rw:wakeall}:rw:rch").Val()["relock:{rw:wakeall}:rw:rch"] == 1
		}, 5*time.Second, time.Millisecond)
		unlocked := time.Now()
		require.NoError(t, l.WriteLock().Unlock(w))
		var ctxs []context.Context
		for range n {
			ctxs = append(ctxs, <-got)
		}
		// Woken, not the fallback: a reader that misses the broadcast
		// sleeps until the writer's lease (30 s) would have run out.
		assert.Less(t, time.Since(unlocked), 5*time.Second, "a reader slept through the broadcast")
		assert.Len(t, holders(t, b, l), n, "all readers hold at once")
		for _, ctx := range ctxs {
			require.NoError(t, l.ReadLock().Unlock(ctx))
		}
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

// The last read unlock wakes a waiting writer; a writer that gives up
// withdraws its claim, and the readers it held back go on.
func TestRWLockLastReadUnlockWakesWriterAndClaimsAreWithdrawn(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.RWLock("rw:claim")
		r, err := l.ReadLock().Lock(bg)
		require.NoError(t, err)

		_, err = l.WriteLock().TryLock(bg, 20*time.Millisecond, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		assert.Zero(t, writersQueued(t, b.rdb, l), "the claim is withdrawn")
		assert.False(t, b.rdb.HExists(bg, l.Key(), "~q").Val(), "no empty queue left in the hash")
		r2, err := l.ReadLock().TryLock(bg, 0, 0)
		require.NoError(t, err, "readers go on once no writer waits")
		require.NoError(t, l.ReadLock().Unlock(r2))

		got := make(chan context.Context, 1)
		go func() {
			ctx, err := l.WriteLock().Lock(bg)
			assert.NoError(t, err)
			got <- ctx
		}()
		require.Eventually(t, func() bool { return writersQueued(t, b.rdb, l) == 1 }, 5*time.Second, time.Millisecond)
		_, err = l.ReadLock().TryLock(bg, 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained, "a new reader queues behind the waiting writer")
		inner, err := l.ReadLock().TryLock(r, 0, 0)
		require.NoError(t, err, "a reader already inside re-enters")
		require.NoError(t, l.ReadLock().Unlock(inner))
		require.NoError(t, l.ReadLock().Unlock(r))
		w := <-got
		assert.Equal(t, map[string]string{"w:" + ownerField(t, c, w): "1"}, holders(t, b, l))
		require.NoError(t, l.WriteLock().Unlock(w))
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

// A reader's hold ends on its own lease: a dead reader does not keep the
// lock busy while others renew theirs.
func TestRWLockReadHoldExpiresOnItsOwnLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.RWLock("rw:lease")
		const lease = 200 * time.Millisecond
		short, err := l.ReadLock().TryLock(bg, 0, lease)
		require.NoError(t, err)
		long, err := l.ReadLock().Lock(bg)
		require.NoError(t, err)
		assert.Len(t, holders(t, b, l), 2)

		<-short.Done()
		assert.ErrorIs(t, context.Cause(short), relock.ErrLockLost)
		require.Eventually(t, func() bool {
			n, err := l.ReadLock().HoldCount(short)
			require.NoError(t, err)
			return n == 0
		}, 5*time.Second, time.Millisecond, "expired in Redis too")
		assert.ErrorIs(t, l.ReadLock().Unlock(short), relock.ErrLockLost)
		// The next script to look at the lock drops the dead reader.
		inner, err := l.ReadLock().Lock(long)
		require.NoError(t, err)
		require.NoError(t, l.ReadLock().Unlock(inner))
		assert.Equal(t, map[string]string{"r:" + ownerField(t, c, long): "1"}, holders(t, b, l))

		got := make(chan context.Context, 1)
		go func() {
			ctx, err := l.WriteLock().Lock(bg)
			assert.NoError(t, err)
			got <- ctx
		}()
		require.Eventually(t, func() bool { return writersQueued(t, b.rdb, l) == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, l.ReadLock().Unlock(long), "the live reader leaves")
		w := <-got
		assert.Equal(t, map[string]string{"w:" + ownerField(t, c, w): "1"}, holders(t, b, l))
		require.NoError(t, l.WriteLock().Unlock(w))
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

// The watchdog renews read and write holds past their lease (450 ms: room for miniredis under -race).
func TestRWLockWatchdogRenewsHolds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		const lease = 450 * time.Millisecond
		c := b.newClient(t, relock.WithWatchdogLease(lease))
		bg := context.Background()
		l := c.RWLock("rw:dog")
		w, err := l.WriteLock().Lock(bg)
		require.NoError(t, err)
		r, err := l.ReadLock().Lock(w)
		require.NoError(t, err)
		assert.Equal(t, 2, c.WatchedHolds(), "read and write holds are separate items")
		ticks, _, _ := c.WatchdogStats()
		require.Eventually(t, func() bool { t2, _, _ := c.WatchdogStats(); return t2 >= ticks+8 }, 5*time.Second, time.Millisecond)
		require.NoError(t, w.Err(), "cause: %v", context.Cause(w))
		require.NoError(t, r.Err(), "cause: %v", context.Cause(r))
		n, err := l.ReadLock().HoldCount(r)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "the read hold is alive in Redis after several leases")
		n, err = l.WriteLock().HoldCount(w)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.NoError(t, l.ReadLock().Unlock(r))
		require.NoError(t, l.WriteLock().Unlock(w))
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

func TestRWLockForceUnlock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.RWLock("rw:force")
		w, err := l.WriteLock().Lock(bg)
		require.NoError(t, err)
		r, err := l.ReadLock().Lock(context.WithoutCancel(w))
		require.NoError(t, err)
		freed, err := l.WriteLock().ForceUnlock(bg)
		require.NoError(t, err)
		assert.True(t, freed)
		<-w.Done()
		assert.ErrorIs(t, context.Cause(w), relock.ErrLockLost)
		require.NoError(t, r.Err(), "read holds are left alone")
		assert.Equal(t, map[string]string{"r:" + ownerField(t, c, r): "1"}, holders(t, b, l))
		freed, err = l.ReadLock().ForceUnlock(bg)
		require.NoError(t, err)
		assert.True(t, freed)
		assert.ErrorIs(t, context.Cause(r), relock.ErrLockLost)
		freed, err = l.ReadLock().ForceUnlock(bg)
		require.NoError(t, err)
		assert.False(t, freed)
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

func TestRWLockBadInputIsAnErrorAndTouchesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		ctx := context.Background()
		l := c.RWLock("ok")
		cases := map[string]func() error{
			"empty name read":  func() error { _, err := c.RWLock("").ReadLock().Lock(ctx); return err },
			"empty name write": func() error { _, err := c.RWLock("").WriteLock().Lock(ctx); return err },
			"nil context":      func() error { _, err := l.ReadLock().Lock(nil); return err }, //nolint:staticcheck // the point of the test
			"negative wait":    func() error { _, err := l.WriteLock().TryLock(ctx, -time.Second, 0); return err },
			"negative lease":   func() error { _, err := l.ReadLock().TryLock(ctx, 0, -time.Second); return err },
			"nil client":       func() error { _, err := relock.New(nil).RWLock("x").WriteLock().Lock(ctx); return err },
			"unlock nil ctx":   func() error { return l.WriteLock().Unlock(nil) },                    //nolint:staticcheck
			"force nil ctx":    func() error { _, err := l.ReadLock().ForceUnlock(nil); return err }, //nolint:staticcheck
			"count nil ctx":    func() error { _, err := l.ReadLock().HoldCount(nil); return err },   //nolint:staticcheck
		}
		for name, call := range cases {
			assert.ErrorIs(t, call(), relock.ErrInvalidArgument, name)
		}
		assert.ErrorIs(t, l.ReadLock().Unlock(ctx), relock.ErrNotHeld)
		assert.ErrorIs(t, l.WriteLock().Unlock(ctx), relock.ErrNotHeld)
		assert.Empty(t, allKeys(t, b.rdb), "bad input changed Redis")
	})
}

// Lost replies make go-redis resend a script: a replayed read or write
// acquire or release must count once.
func TestRWLockReplayedScriptsCountOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	drop := redistest.NewReplyDropper()
	rdb.AddHook(drop)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	bg := context.Background()
	l := c.RWLock("rw:replay")
	b := &backend{name: "redis", srv: srv, rdb: rdb}
	warm, err := l.WriteLock().Lock(bg)
	require.NoError(t, err)
	warmR, err := l.ReadLock().Lock(warm)
	require.NoError(t, err)
	require.NoError(t, l.ReadLock().Unlock(warmR))
	require.NoError(t, l.WriteLock().Unlock(warm))

	warmTok := storedTail(t, rdb, l.Key())
	drop.Arm("evalsha", 1)
	w, err := l.WriteLock().Lock(bg)
	require.NoError(t, err)
	owner := ownerField(t, c, w)
	wTok, err := l.WriteLock().Token(w)
	require.NoError(t, err)
	assert.Greater(t, wTok, warmTok)
	assert.Equal(t, wTok, storedToken(t, rdb, l.Key()), "the replay answered with the token it granted, not a new one")
	drop.Arm("evalsha", 1)
	r, err := l.ReadLock().Lock(context.WithoutCancel(w))
	require.NoError(t, err)
	drop.Arm("evalsha", 1)
	r2, err := l.ReadLock().Lock(r)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"w:" + owner: "1", "r:" + owner: "2"}, holders(t, b, l))
	drop.Arm("evalsha", 1)
	require.NoError(t, l.ReadLock().Unlock(r2))
	drop.Arm("evalsha", 1)
	require.NoError(t, l.WriteLock().Unlock(w), "a replayed final release is success")
	assert.Equal(t, map[string]string{"r:" + owner: "1"}, holders(t, b, l))
	drop.Arm("evalsha", 1)
	require.NoError(t, l.ReadLock().Unlock(r))
	assert.EqualValues(t, 6, drop.Dropped())
	tok, err := func() (int64, error) {
		ctx, err := l.WriteLock().Lock(bg)
		if err != nil {
			return 0, err
		}
		defer l.WriteLock().Unlock(ctx) //nolint:errcheck
		return l.WriteLock().Token(ctx)
	}()
	require.NoError(t, err)
	assert.Greater(t, tok, wTok, "the next write hold's token is above the replayed one's")
	assert.Empty(t, keysLeft(t, rdb))
}

// Queued writers stay out of the lock's hash, which every RWLock script
// reads whole: it keeps one mark field whatever the queue's length, and the
// writers are handed the write hold in the order they queued.
func TestRWLockHashStaysSmallWithManyQueuedWriters(t *testing.T) {
	b := newReal(t)
	bg := context.Background()
	c := b.newClient(t)
	l := c.RWLock("rw:many")
	r, err := l.ReadLock().Lock(bg)
	require.NoError(t, err)
	const n = 40
	writers := make([]*relock.WriteLock, n)
	waiting := make([]<-chan granted, n)
	for i := range waiting {
		writers[i] = b.newClient(t).RWLock("rw:many").WriteLock()
		waiting[i] = lockAsync(writers[i])
		require.Eventually(t, func() bool { return writersQueued(t, b.rdb, l) == i+1 }, 5*time.Second, time.Millisecond)
	}
	hash := hgetall(t, b.rdb, l.Key())
	assert.Len(t, hash, 4+1, "a reader's four fields and the queue's mark: %v", hash)
	assert.Less(t, len(hash["~q"]), 64, "the mark is the queue's size, not its entries")

	require.NoError(t, l.ReadLock().Unlock(r))
	for i, got := range waiting {
		ctx := mustGet(t, got, 5*time.Second)
		require.NoError(t, context.Cause(ctx), "writer %d", i)
		require.NoError(t, writers[i].Unlock(ctx))
	}
	assert.Empty(t, keysLeft(t, b.rdb))
}
