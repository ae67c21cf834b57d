package relock_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

func llen(t testing.TB, rdb redis.UniversalClient, key string) int {
	t.Helper()
	n, err := rdb.LLen(context.Background(), key).Result()
	require.NoError(t, err)
	return int(n)
}

// queued is one entry of a FairLock's queue (see fair_common.lua).
type queued struct{ id, owner string }

// fairQueue reads a FairLock's queue key: entries of four NUL-terminated
// fields (waiter id, lease, fencing flag, owner), first in line first.
func fairQueue(t testing.TB, rdb redis.UniversalClient, key string) []queued {
	t.Helper()
	entries, err := rdb.ZRange(context.Background(), key, 0, -1).Result()
	require.NoError(t, err)
	var out []queued
	for _, e := range entries {
		f := strings.Split(e, "\x00")
		require.Len(t, f, 5, "an entry is four NUL-terminated fields")
		out = append(out, queued{id: f[0], owner: f[3]})
	}
	return out
}

func fairLen(t testing.TB, rdb redis.UniversalClient, key string) int {
	t.Helper()
	return len(fairQueue(t, rdb, key))
}

func TestFairLockLockUnlockReentry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		l := c.FairLock("fair:basic")
		bg := context.Background()
		ctx, err := l.Lock(bg)
		require.NoError(t, err)
		owner := ownerField(t, c, ctx)
		assert.Equal(t, map[string]string{owner: "1"}, owners(t, b.rdb, l.Key()))
		assert.Equal(t, "relock:{fair:basic}:fair", l.Key())
		assert.Greater(t, pttl(t, b.rdb, l.Key()), 25*time.Second)
		assert.Equal(t, 1, c.WatchedHolds())
		tok, err := l.Token(ctx)
		require.NoError(t, err)
		assert.Positive(t, tok)
		assert.Equal(t, tok, storedToken(t, b.rdb, l.Key()))

		inner, err := l.TryLock(ctx, 0, time.Second)
		require.NoError(t, err, "re-entry while nobody queues")
		n, err := l.HoldCount(inner)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		innerTok, err := l.Token(inner)
		require.NoError(t, err)
		assert.Equal(t, tok, innerTok)
		ttl, err := l.TTL(inner)
		require.NoError(t, err)
		assert.Greater(t, ttl, 25*time.Second, "re-entry with a shorter lease does not shorten it")
		locked, err := l.IsLocked(bg)
		require.NoError(t, err)
		assert.True(t, locked)

		require.NoError(t, l.Unlock(inner))
		assert.Equal(t, map[string]string{owner: "1"}, owners(t, b.rdb, l.Key()))
		require.NoError(t, ctx.Err())
		require.NoError(t, l.Unlock(ctx))
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrUnlocked)
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrNotHeld)
		held, err := l.HoldCount(ctx)
		require.NoError(t, err)
		assert.Zero(t, held)
		assert.Empty(t, keysLeft(t, b.rdb))
		assert.Equal(t, tok, storedTail(t, b.rdb, l.Key()), "the tail keeps the released hold's token")
		assert.Equal(t, 0, c.TrackedHolds())
		assert.Equal(t, 0, c.WatchedHolds())
	})
}

// 20 goroutines over two Clients (two "processes") queue one after the other
// while the lock is held; they must get it in exactly that order.
func TestFairLockGrantsInRequestOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c1 := b.newClient(t)
		c2 := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = c2.Close() })
		bg := context.Background()
		name := "fair:fifo"
		queue := c1.FairLock(name).QueueKey()
		holder, err := c1.FairLock(name).Lock(bg)
		require.NoError(t, err)

		const n = 20
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := []*relock.Client{c1, c2}[i%2].FairLock(name)
				ctx, err := l.Lock(bg)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				assert.NoError(t, l.Unlock(ctx))
			}()
			// The next one starts only once this one stands in the queue.
			require.Eventually(t, func() bool { return fairLen(t, b.rdb, queue) == i+1 },
				5*time.Second, time.Millisecond, "waiter %d did not queue", i)
		}
		// A Client's waiters share one channel, where the hand-overs to
		// them come.
		assert.Equal(t, 1, c1.SubscribedChannels())
		assert.Equal(t, 1, c2.SubscribedChannels())

		require.NoError(t, c1.FairLock(name).Unlock(holder))
		wg.Wait()
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		assert.Equal(t, want, order)
		assert.Empty(t, keysLeft(t, b.rdb), "queue keys are gone once nobody waits")
		require.Eventually(t, func() bool { // after the channel's linger
			return c1.SubscribedChannels() == 0 && c2.SubscribedChannels() == 0
		}, 10*time.Second, 10*time.Millisecond)
	})
}

// An unlock hands the lock over to the next waiter only: one message, on its
// Client's channel, naming it, in queue order; the others keep their places.
func TestFairLockUnlockHandsOverToTheNextWaiterOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.FairLock("fair:wake")
		holder, err := l.Lock(bg)
		require.NoError(t, err)
		spy := b.newConn(t).PSubscribe(bg, l.Key()+":*")
		_, err = spy.Receive(bg) // the subscription is confirmed
		require.NoError(t, err)
		msgs := spy.Channel()

		const n = 5
		got := make(chan context.Context, n)
		for i := range n {
			go func() {
				ctx, err := l.Lock(bg)
				if assert.NoError(t, err) {
					got <- ctx
				}
			}()
			require.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == i+1 }, 5*time.Second, time.Millisecond)
		}
		queue := fairQueue(t, b.rdb, l.QueueKey())

		require.NoError(t, l.Unlock(holder))
		first := <-got
		assert.Equal(t, map[string]string{queue[0].owner: "1"}, owners(t, b.rdb, l.Key()))
		assert.Equal(t, queue[1:], fairQueue(t, b.rdb, l.QueueKey()), "the others keep their places")
		require.NoError(t, l.Unlock(first))
		for range n - 1 {
			require.NoError(t, l.Unlock(<-got))
		}

		// One message per hand-over, on this Client's channel, to the
		// head of the queue at that moment.
		var handed []string
		for len(handed) < n {
			select {
			case msg := <-msgs:
				assert.Equal(t, l.Key()+":w:"+c.ID(), msg.Channel)
				id, _, _ := strings.Cut(msg.Payload, " ")
				handed = append(handed, id)
			case <-time.After(5 * time.Second):
				t.Fatalf("only %d hand-overs: %v", len(handed), handed)
			}
		}
		want := make([]string, n)
		for i, w := range queue {
			want[i] = w.id
		}
		assert.Equal(t, want, handed)
		select {
		case msg := <-msgs:
			t.Fatalf("a message once the queue was empty, on %s: %q", msg.Channel, msg.Payload)
		default:
		}
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

// A string left at the queue's name by an older version (whose queue was a
// string key there) lives up to the waiter timeout during a rolling
// upgrade: the queue's own key is of another name, so a FairLock works
// beside it, contended or not.
func TestFairLockIgnoresAnOldFormatQueueString(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.FairLock("fair:upgrade")
		old := "relock:{fair:upgrade}:fair:q"
		require.NotEqual(t, old, l.QueueKey())
		require.NoError(t, b.rdb.Set(bg, old, "w1\x0030000\x001\x00u1:1\x00", 10*time.Second).Err())

		holder, err := l.Lock(bg)
		require.NoError(t, err)
		got := lockAsync(l)
		require.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, l.Unlock(holder))
		g := <-got
		require.NoError(t, g.err)
		require.NoError(t, l.Unlock(g.ctx))
		assert.Equal(t, "string", b.rdb.Type(bg, old).Val(), "the old key is left alone")
	})
}

// A new owner does not barge in on a free lock while others queue.
func TestFairLockTryLockDoesNotJumpTheQueue(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.FairLock("fair:nobarge")
		holder, err := l.Lock(bg)
		require.NoError(t, err)
		got := make(chan context.Context, 1)
		go func() {
			ctx, err := l.Lock(bg)
			assert.NoError(t, err)
			got <- ctx
		}()
		require.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == 1 }, 5*time.Second, time.Millisecond)
		waiter := fairQueue(t, b.rdb, l.QueueKey())[0].owner

		// The lock is free behind the waiter's back, but the waiter comes
		// first.
		other := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = other.Close() })
		require.NoError(t, b.rdb.Del(bg, l.Key()).Err()) // the holder's lease ran out, say
		_, err = other.FairLock("fair:nobarge").TryLock(bg, 0, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained)

		// The barger's attempt handed the lock to the waiter; the barger
		// left no trace in the queue.
		ctx := <-got
		assert.Equal(t, map[string]string{waiter: "1"}, owners(t, b.rdb, l.Key()))
		assert.Equal(t, 0, fairLen(t, b.rdb, l.QueueKey()))
		assert.Equal(t, []string{l.Key()}, sorted(keysLeft(t, b.rdb)))
		require.NoError(t, l.Unlock(ctx))
		assert.ErrorIs(t, l.Unlock(holder), relock.ErrLockLost)
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

// A waiter that stops waiting — TryLock timed out, context cancelled —
// leaves the queue at once, and whoever stood behind it moves up.
func TestFairLockWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.FairLock("fair:leave")
		holder, err := l.Lock(bg)
		require.NoError(t, err)

		_, err = l.TryLock(bg, 20*time.Millisecond, 0)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		// Its leaving the queue is waited for at most cleanupGrace past
		// the wait (see below).
		assert.Eventually(t, func() bool {
			return fairLen(t, b.rdb, l.QueueKey()) == 0 && slices.Equal([]string{l.Key()}, sorted(keysLeft(t, b.rdb)))
		}, 5*time.Second, time.Millisecond, "the waiter that gave up left the queue, and its key")

		cctx, cancel := context.WithCancel(bg)
		quit := make(chan error, 1)
		go func() {
			_, err := l.Lock(cctx)
			quit <- err
		}()
		require.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == 1 }, 5*time.Second, time.Millisecond)
		got := make(chan context.Context, 1)
		go func() {
			ctx, err := l.Lock(bg)
			assert.NoError(t, err)
			got <- ctx
		}()
		require.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == 2 }, 5*time.Second, time.Millisecond)
		cancel()
		err = <-quit
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.ErrorIs(t, err, context.Canceled)
		// Leaving the queue is waited for only cleanupGrace (50 ms) past
		// the caller's bound; on a loaded machine it may finish after.
		assert.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == 1 }, 5*time.Second, time.Millisecond)

		require.NoError(t, l.Unlock(holder))
		ctx := <-got
		require.NoError(t, l.Unlock(ctx))
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

// fairChildEnv makes the test binary a waiter process that queues on a fair
// lock and blocks there until it is killed.
const fairChildEnv = "RELOCK_FAIR_CHILD"

// TestFairLockChildProcess is not a test: it is the body of the child
// process that TestFairLockKilledWaiterIsSkipped kills.
func TestFairLockChildProcess(t *testing.T) {
	spec := os.Getenv(fairChildEnv)
	if spec == "" {
		return
	}
	addr, name, _ := strings.Cut(spec, "|")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c := relock.New(rdb) // the default waiter timeout, 10 s: eviction would take that long
	_, err := c.FairLock(name).Lock(context.Background())
	t.Fatalf("the child must block until killed, got %v", err)
}

// A waiter whose process is killed does not block the ones behind it: its
// Client no longer listens, so the release skips it and hands the lock to
// the next at once. Bound: no delay (measured against the holder's lease,
// which a grant to the dead waiter would cost).
func TestFairLockKilledWaiterIsSkipped(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		name := "fair:crash"
		l := c.FairLock(name)
		holder, err := l.Lock(bg)
		require.NoError(t, err)

		child := exec.Command(os.Args[0], "-test.run=^TestFairLockChildProcess$")
		child.Env = append(os.Environ(), fairChildEnv+"="+b.addr()+"|"+name)
		require.NoError(t, child.Start())
		t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
		require.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == 1 }, 10*time.Second, time.Millisecond)
		dead := fairQueue(t, b.rdb, l.QueueKey())[0]

		got := make(chan context.Context, 1)
		go func() {
			ctx, err := l.Lock(bg)
			assert.NoError(t, err)
			got <- ctx
		}()
		require.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == 2 }, 5*time.Second, time.Millisecond)
		require.NoError(t, child.Process.Kill()) // SIGKILL: no cleanup at all
		_ = child.Wait()

		// Once the kernel closed its connections, the dead waiter's Client
		// has left its channel.
		ch := l.Key() + ":w:" + strings.SplitN(dead.id, ":", 2)[0]
		require.Eventually(t, func() bool {
			n, err := b.rdb.PubSubNumSub(bg, ch).Result()
			return err == nil && n[ch] == 0
		}, 5*time.Second, time.Millisecond)
		unlocked := time.Now()
		require.NoError(t, l.Unlock(holder))
		var ctx context.Context
		select {
		case ctx = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter behind a dead one is stuck")
		}
		handOff := time.Since(unlocked)
		t.Logf("hand-off past a killed waiter: %v", handOff)
		assert.Less(t, handOff, time.Second, "the hand-over skipped the dead waiter, not a lease or timeout later")
		assert.Equal(t, map[string]string{ownerField(t, c, ctx): "1"}, owners(t, b.rdb, l.Key()))
		assert.NotContains(t, fairQueue(t, b.rdb, l.QueueKey()), dead)
		require.NoError(t, l.Unlock(ctx))
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

func TestFairLockForceUnlockHandsOverToTheNextWaiter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		bg := context.Background()
		l := c.FairLock("fair:force")
		holder, err := l.Lock(bg)
		require.NoError(t, err)
		got := make(chan context.Context, 1)
		go func() {
			ctx, err := l.Lock(bg)
			assert.NoError(t, err)
			got <- ctx
		}()
		require.Eventually(t, func() bool { return fairLen(t, b.rdb, l.QueueKey()) == 1 }, 5*time.Second, time.Millisecond)
		first, err := l.Token(holder)
		require.NoError(t, err)
		other := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = other.Close() })
		freed, err := other.FairLock("fair:force").ForceUnlock(bg)
		require.NoError(t, err)
		assert.True(t, freed)
		ctx := <-got
		tok, err := l.Token(ctx)
		require.NoError(t, err)
		assert.Greater(t, tok, first)
		assert.ErrorIs(t, l.Unlock(holder), relock.ErrLockLost, "the old holder learns it lost the lock")
		freed, err = l.ForceUnlock(bg)
		require.NoError(t, err)
		assert.True(t, freed)
		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), relock.ErrLockLost)
		assert.Empty(t, keysLeft(t, b.rdb))
	})
}

func TestFairLockBadInputIsAnErrorAndTouchesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		ctx := context.Background()
		l := c.FairLock("ok")
		cases := map[string]func() error{
			"empty name":     func() error { _, err := c.FairLock("").Lock(ctx); return err },
			"nil context":    func() error { _, err := l.Lock(nil); return err }, //nolint:staticcheck // the point of the test
			"negative wait":  func() error { _, err := l.TryLock(ctx, -time.Second, 0); return err },
			"negative lease": func() error { _, err := l.TryLock(ctx, 0, -time.Second); return err },
			"nil client":     func() error { _, err := relock.New(nil).FairLock("x").Lock(ctx); return err },
			"bad waiter timeout": func() error {
				_, err := relock.New(b.rdb, relock.WithWaiterTimeout(time.Microsecond)).FairLock("x").Lock(ctx)
				return err
			},
			"unlock nil ctx": func() error { return l.Unlock(nil) },                     //nolint:staticcheck
			"force nil ctx":  func() error { _, err := l.ForceUnlock(nil); return err }, //nolint:staticcheck
			"ttl nil ctx":    func() error { _, err := l.TTL(nil); return err },         //nolint:staticcheck
		}
		for name, call := range cases {
			assert.ErrorIs(t, call(), relock.ErrInvalidArgument, name)
		}
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrNotHeld)
		_, err := l.Token(ctx)
		assert.ErrorIs(t, err, relock.ErrNotHeld)
		assert.Empty(t, allKeys(t, b.rdb), "bad input changed Redis")
	})
}

// Lost replies make go-redis resend a script: a replayed attempt must not
// queue twice, count a hold twice or release one twice.
func TestFairLockReplayedScriptsCountOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	drop := redistest.NewReplyDropper()
	rdb.AddHook(drop)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	bg := context.Background()
	l := c.FairLock("fair:replay")
	// Warm up the scripts and this Client's hand-over channel, which then
	// lingers: the next waiter queues at its first attempt.
	warm, err := l.Lock(bg)
	require.NoError(t, err)
	warmed := make(chan error, 1)
	go func() {
		ctx, err := l.Lock(bg)
		if err == nil {
			err = l.Unlock(ctx)
		}
		warmed <- err
	}()
	require.Eventually(t, func() bool { return fairLen(t, rdb, l.QueueKey()) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Unlock(warm))
	require.NoError(t, <-warmed)

	holder, err := l.Lock(bg)
	require.NoError(t, err)
	drop.Arm("evalsha", 1) // the waiter's first attempt: it queues twice over
	got := make(chan context.Context, 1)
	go func() {
		ctx, err := l.Lock(bg)
		assert.NoError(t, err)
		got <- ctx
	}()
	require.Eventually(t, func() bool { return drop.Dropped() == 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return fairLen(t, rdb, l.QueueKey()) == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1, c.SubscribedChannels())
	assert.Equal(t, 1, fairLen(t, rdb, l.QueueKey()), "queued once")

	drop.Arm("evalsha", 1) // the final release
	require.NoError(t, l.Unlock(holder))
	ctx := <-got
	owner := ownerField(t, c, ctx)
	first := hgetall(t, rdb, l.Key())
	assert.Equal(t, map[string]string{owner: "1"}, ownersOf(t, first))
	tok, err := l.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, tok, storedToken(t, rdb, l.Key()))

	drop.Arm("evalsha", 1)
	inner, err := l.Lock(ctx)
	require.NoError(t, err)
	second := hgetall(t, rdb, l.Key())
	assert.Equal(t, map[string]string{owner: "2"}, ownersOf(t, second))
	assert.Equal(t, first["~g"], second["~g"], "the replayed re-entry is the same hold")
	assert.Equal(t, first["~t"], second["~t"])
	require.NoError(t, l.Unlock(inner))
	drop.Arm("evalsha", 1)
	require.NoError(t, l.Unlock(ctx), "a replayed final release is success")
	assert.EqualValues(t, 4, drop.Dropped())
	assert.Empty(t, keysLeft(t, rdb))
	assert.Equal(t, tok, storedTail(t, rdb, l.Key()))
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
