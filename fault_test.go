package relock_test

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// The fault suite injects real faults between relock and a real redis-server
// and checks, for every exclusive lock type: no two holders at once while
// both believe they hold; a holder whose lock is gone is told; waiters are not
// stranded; nothing leaks a goroutine.

// noLeaks makes the test fail if goroutines started during it outlive it.
// Call it first, so that its check runs after every other cleanup.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// believers checks mutual exclusion as the holders see it: when a hold is
// granted, every earlier hold must already know it is over (its context
// done), and fencing tokens must grow in the order holds are granted.
type believers struct {
	t    *testing.T
	mu   sync.Mutex
	held map[context.Context]string
	last int64
}

func newBelievers(t *testing.T) *believers {
	return &believers{t: t, held: make(map[context.Context]string)}
}

func (b *believers) enter(who string, ctx context.Context, token int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for other, name := range b.held {
		if other.Err() == nil {
			b.t.Errorf("%s was granted the lock while %s still believes it holds it", who, name)
		}
	}
	if token <= b.last {
		b.t.Errorf("%s got fencing token %d after %d", who, token, b.last)
	}
	b.last = token
	b.held[ctx] = who
}

func (b *believers) exit(ctx context.Context) {
	b.mu.Lock()
	delete(b.held, ctx)
	b.mu.Unlock()
}

func token(t *testing.T, l exclusive, ctx context.Context) int64 {
	t.Helper()
	tok, err := l.Token(ctx)
	require.NoError(t, err)
	return tok
}

// mustNotGet fails if the waiter has been granted the lock.
func mustNotGet(t *testing.T, ch <-chan granted) {
	t.Helper()
	select {
	case g := <-ch:
		t.Fatalf("Lock returned (err %v) while it should still be waiting", g.err)
	default:
	}
}

func mustGet(t *testing.T, ch <-chan granted, within time.Duration) context.Context {
	t.Helper()
	select {
	case g := <-ch:
		require.NoError(t, g.err)
		return g.ctx
	case <-time.After(within):
		t.Fatalf("the waiter was stranded for %v", within)
		return nil
	}
}

// farWaiter are the options of a waiter Client whose fallback poll is far
// away: it sleeps at most its watchdog lease (the default 30 s) and, for the
// waiters registered in Redis, a third of its waiter timeout.
var farWaiter = []relock.Option{relock.WithWaiterTimeout(time.Minute)}

// farFallback makes a hand-off after a fault meaningful: a waiter (of a
// farWaiter Client) that gets the lock within seconds of the unlock must
// have been woken by it, not by its fallback poll when the holder's lease
// would end. It re-enters the hold with a minute's lease and waits for the
// waiter's current sleep (at most the holder's lease) to end, so that the
// waiter's next poll sees that lease and is 20 s or more away. The caller
// unlocks the returned context, then the hold, then expects the waiter
// within 5 s.
func farFallback(t *testing.T, l exclusive, hctx context.Context, lease time.Duration) context.Context {
	t.Helper()
	inner, err := l.TryLock(hctx, 0, time.Minute)
	require.NoError(t, err)
	time.Sleep(lease + 500*time.Millisecond)
	return inner
}

func TestFaultServerPaused(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		// Shorter than the lease: the holder keeps the lock through it and
		// the waiter keeps waiting.
		t.Run("ShorterThanLease", func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t)
			const lease = 1500 * time.Millisecond
			holder := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
			t.Cleanup(func() { _ = holder.Close() })
			waiter := relock.New(srv.Client(), farWaiter...)
			t.Cleanup(func() { _ = waiter.Close() })
			check := newBelievers(t)

			l := k.open(holder, "paused")
			hctx, err := l.Lock(context.Background())
			require.NoError(t, err)
			check.enter("holder", hctx, token(t, l, hctx))
			got := lockAsync(k.open(waiter, "paused"))
			require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)

			srv.Pause()
			time.Sleep(lease / 3) // the fault itself: one renewal falls into it
			srv.Resume()
			waitTicks(t, holder, 2)
			require.NoError(t, hctx.Err(), "a pause shorter than the lease must not cost the lock")
			assert.Greater(t, pttl(t, srv.Client(), k.keyOf(holder, "paused")), lease/2)
			mustNotGet(t, got)

			inner := farFallback(t, l, hctx, lease)
			mustNotGet(t, got)
			check.exit(hctx)
			require.NoError(t, l.Unlock(inner))
			require.NoError(t, l.Unlock(hctx))
			wctx := mustGet(t, got, 5*time.Second) // woken by the unlock
			check.enter("waiter", wctx, token(t, k.open(waiter, "paused"), wctx))
			require.NoError(t, k.open(waiter, "paused").Unlock(wctx))
		})

		// Longer than the lease: the lock expires in Redis, so the holder
		// must have been told before Redis can grant it to the waiter.
		t.Run("LongerThanLease", func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t)
			const lease = 600 * time.Millisecond
			holder := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
			t.Cleanup(func() { _ = holder.Close() })
			// The waiter's next attempt is sent during the pause: with a lease
			// shorter than the pause, it could not count on the hold it is
			// granted (the reply may come after that lease).
			waiter := relock.New(srv.Client(), relock.WithWatchdogLease(5*time.Second))
			t.Cleanup(func() { _ = waiter.Close() })
			check := newBelievers(t)
			key := k.keyOf(holder, "paused")

			l := k.open(holder, "paused")
			hctx, err := l.Lock(context.Background())
			require.NoError(t, err)
			check.enter("holder", hctx, token(t, l, hctx))
			got := lockAsync(k.open(waiter, "paused"))
			require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)

			srv.Pause()
			// The fault: long enough for the lease to run out in Redis, but
			// shorter than go-redis's 3 s read timeout, so that only a holder
			// that watches its lease, not its calls, is told in time.
			time.Sleep(lease + time.Second)
			srv.Resume()
			// The lease ran out in Redis: the waiter gets in, and the holder
			// must have been told by then (check.enter). The waiter's attempt
			// may have been sent during the pause; go-redis bounds it by its
			// read timeout (3 s) and retries, which a loaded machine has
			// stretched past 5 s once in a full -race run: 10 s still tells a
			// stranded waiter from a slow one.
			wctx := mustGet(t, got, 10*time.Second)
			check.enter("waiter", wctx, token(t, k.open(waiter, "paused"), wctx))
			require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
			assert.ErrorIs(t, l.Unlock(hctx), relock.ErrLockLost, "the late Unlock changes nothing")
			assert.Equal(t, map[string]string{ownerField(t, waiter, wctx): "1"}, k.state(t, srv.Client(), key))
			require.NoError(t, k.open(waiter, "paused").Unlock(wctx))
		})
	})
}

func TestFaultServerRestarted(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		// With an fsynced append-only file the hold survives the restart:
		// the holder keeps it, the waiter re-subscribes and still waits, and
		// is woken by the unlock.
		t.Run("Durable", func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
			const lease = 1500 * time.Millisecond
			holder := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
			t.Cleanup(func() { _ = holder.Close() })
			waiter := relock.New(srv.Client(), farWaiter...)
			t.Cleanup(func() { _ = waiter.Close() })
			check := newBelievers(t)
			key := k.keyOf(holder, "restart")

			l := k.open(holder, "restart")
			hctx, err := l.Lock(context.Background())
			require.NoError(t, err)
			check.enter("holder", hctx, token(t, l, hctx))
			got := lockAsync(k.open(waiter, "restart"))
			require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)

			srv.Restart()
			assert.Equal(t, map[string]string{ownerField(t, holder, hctx): "1"}, k.state(t, srv.Client(), key), "reloaded from the AOF")
			waitTicks(t, holder, 2)
			require.NoError(t, hctx.Err())
			// The waiter's subscriber came back: the unlock reaches it.
			require.Eventually(t, func() bool { return k.waiterSubscribed(srv.Client(), waiter, "restart") }, 5*time.Second, 5*time.Millisecond)
			mustNotGet(t, got)

			inner := farFallback(t, l, hctx, lease)
			mustNotGet(t, got)
			check.exit(hctx)
			require.NoError(t, l.Unlock(inner))
			require.NoError(t, l.Unlock(hctx))
			wctx := mustGet(t, got, 5*time.Second) // woken by the unlock
			check.enter("waiter", wctx, token(t, k.open(waiter, "restart"), wctx))
			require.NoError(t, k.open(waiter, "restart").Unlock(wctx))
		})

		// The server is down for longer than go-redis's own retries while a
		// waiter's attempt is due: the waiter rides it out and gets the lock
		// once the server is back and the holder's lease is over.
		t.Run("WaiterRidesOutOutage", func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
			holder := relock.New(srv.Client())
			t.Cleanup(func() { _ = holder.Close() })
			waiter := relock.New(srv.Client())
			t.Cleanup(func() { _ = waiter.Close() })
			check := newBelievers(t)

			const lease = 500 * time.Millisecond
			l := k.open(holder, "outage")
			hctx, err := l.TryLock(context.Background(), 0, lease)
			require.NoError(t, err)
			check.enter("holder", hctx, token(t, l, hctx))
			got := lockAsync(k.open(waiter, "outage"))
			require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)

			srv.Kill()
			<-hctx.Done()               // the holder's lease ends during the outage
			time.Sleep(2 * time.Second) // the outage outlasts go-redis's retries
			mustNotGet(t, got)
			srv.Restart()
			wctx := mustGet(t, got, 5*time.Second)
			check.enter("waiter", wctx, token(t, k.open(waiter, "outage"), wctx))
			require.NoError(t, k.open(waiter, "outage").Unlock(wctx))
		})

		// Without persistence the restart loses the lock: the holder is told
		// at its next renewal and the waiter, re-checking on re-subscription,
		// gets in. The two overlap for up to one renewal interval: nothing in
		// the client can prevent that when Redis forgets its data (see the
		// README). The tokens still increase: they come from the server's
		// clock, which the restart does not set back.
		t.Run("DataLost", func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t)
			const lease = 900 * time.Millisecond
			holder := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
			t.Cleanup(func() { _ = holder.Close() })
			waiter := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
			t.Cleanup(func() { _ = waiter.Close() })

			l := k.open(holder, "restart")
			hctx, err := l.Lock(context.Background())
			require.NoError(t, err)
			htok := token(t, l, hctx)
			got := lockAsync(k.open(waiter, "restart"))
			require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)

			srv.Restart()
			wctx := mustGet(t, got, 2*lease)
			assert.Greater(t, token(t, k.open(waiter, "restart"), wctx), htok, "tokens survive the loss of the data")
			select {
			case <-hctx.Done():
				require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
			case <-time.After(2 * lease):
				t.Fatal("the holder was never told that the restart lost its lock")
			}
			assert.ErrorIs(t, l.Unlock(hctx), relock.ErrLockLost)
			require.NoError(t, k.open(waiter, "restart").Unlock(wctx))
		})
	})
}

func TestFaultConnectionCut(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		noLeaks(t)
		srv := redistest.Start(t)
		proxy := redistest.NewProxy(t, srv.Addr())
		const lease = 900 * time.Millisecond
		via := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
		t.Cleanup(func() { _ = via.Close() })
		holder := relock.New(via, relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = holder.Close() })
		waiter := relock.New(via, farWaiter...)
		t.Cleanup(func() { _ = waiter.Close() })
		check := newBelievers(t)

		l := k.open(holder, "cut")
		hctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		check.enter("holder", hctx, token(t, l, hctx))
		got := lockAsync(k.open(waiter, "cut"))
		require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
		accepted := proxy.Accepted()

		proxy.Cut()
		// Everyone reconnects: renewals go on, the subscriber re-subscribes.
		waitTicks(t, holder, 3)
		require.NoError(t, hctx.Err(), "a cut connection must not cost the lock")
		assert.Greater(t, proxy.Accepted(), accepted, "clients reconnected")
		require.Eventually(t, func() bool { return k.waiterSubscribed(srv.Client(), waiter, "cut") }, 5*time.Second, 5*time.Millisecond)
		mustNotGet(t, got)

		inner := farFallback(t, l, hctx, lease)
		mustNotGet(t, got)
		check.exit(hctx)
		require.NoError(t, l.Unlock(inner))
		require.NoError(t, l.Unlock(hctx))
		wctx := mustGet(t, got, 5*time.Second) // woken by the unlock
		check.enter("waiter", wctx, token(t, k.open(waiter, "cut"), wctx))
		require.NoError(t, k.open(waiter, "cut").Unlock(wctx))
	})
}

// A partition (the holder's connection stalls, nothing arrives, nothing
// fails) longer than the lease: the holder must stop believing when its
// lease ends, before the other side can take the lock.
func TestFaultPartition(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		noLeaks(t)
		srv := redistest.Start(t)
		proxy := redistest.NewProxy(t, srv.Addr())
		// The holder stops believing a safety margin (lease/100 + 2 ms)
		// before Redis can expire the lock: long enough a lease that the
		// margin outweighs scheduling delays on a busy machine.
		const lease = 1500 * time.Millisecond
		via := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
		t.Cleanup(func() { _ = via.Close() })
		holder := relock.New(via, relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = holder.Close() })
		waiter := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = waiter.Close() })
		check := newBelievers(t)
		key := k.keyOf(holder, "partition")

		l := k.open(holder, "partition")
		hctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		check.enter("holder", hctx, token(t, l, hctx))
		got := lockAsync(k.open(waiter, "partition"))
		require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)

		proxy.Stall()
		wctx := mustGet(t, got, 5*time.Second) // the lease ran out in Redis
		check.enter("waiter", wctx, token(t, k.open(waiter, "partition"), wctx))
		require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
		proxy.Unstall()

		assert.ErrorIs(t, l.Unlock(hctx), relock.ErrLockLost)
		assert.Equal(t, map[string]string{ownerField(t, waiter, wctx): "1"}, k.state(t, srv.Client(), key), "the late Unlock changed nothing")
		require.NoError(t, k.open(waiter, "partition").Unlock(wctx))
	})
}

// A slow link (every chunk delayed) slows everything down and breaks nothing.
func TestFaultSlowLink(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		noLeaks(t)
		srv := redistest.Start(t)
		proxy := redistest.NewProxy(t, srv.Addr())
		proxy.SetDelay(15 * time.Millisecond)
		const lease = 600 * time.Millisecond
		check := newBelievers(t)
		var clients []*relock.Client
		for range 2 {
			via := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
			t.Cleanup(func() { _ = via.Close() })
			c := relock.New(via, relock.WithWatchdogLease(lease))
			t.Cleanup(func() { _ = c.Close() })
			clients = append(clients, c)
		}
		rdb := srv.Client()
		const goroutines, rounds = 4, 4
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := k.open(clients[g%2], "slow")
				for range rounds {
					hctx, err := l.TryLock(context.Background(), 20*time.Second, 0)
					if !assert.NoError(t, err) {
						return
					}
					tok, err := l.Token(hctx)
					assert.NoError(t, err)
					check.enter("g"+strconv.Itoa(g), hctx, tok)
					v, _ := rdb.Get(hctx, "slow:n").Int()
					time.Sleep(lease / 2) // work while held, across renewals
					assert.NoError(t, rdb.Set(hctx, "slow:n", v+1, 0).Err())
					assert.NoError(t, hctx.Err(), "a slow link must not cost the lock")
					check.exit(hctx)
					assert.NoError(t, l.Unlock(hctx))
				}
			}()
		}
		wg.Wait()
		n, err := rdb.Get(context.Background(), "slow:n").Int()
		require.NoError(t, err)
		assert.Equal(t, goroutines*rounds, n)
	})
}

// Replies lost after the server executed the command, at random, under
// contention: go-redis resends, and the scripts recognise their own replay.
func TestFaultDroppedReplies(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		noLeaks(t)
		srv := redistest.Start(t)
		const lease = 900 * time.Millisecond
		check := newBelievers(t)
		var clients []*relock.Client
		var droppers []*redistest.ReplyDropper
		for range 2 {
			rdb := srv.Client()
			d := redistest.NewReplyDropper()
			rdb.AddHook(d)
			require.NoError(t, rdb.Ping(context.Background()).Err())
			c := relock.New(rdb, relock.WithWatchdogLease(lease))
			t.Cleanup(func() { _ = c.Close() })
			clients = append(clients, c)
			droppers = append(droppers, d)
		}
		rdb := srv.Client()
		const goroutines, rounds = 4, 6
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.New(rand.NewPCG(uint64(g), 7))
				c, d := clients[g%2], droppers[g%2]
				l := k.open(c, "dropped")
				for range rounds {
					if rnd.IntN(2) == 0 {
						d.Arm("evalsha", 1)
					}
					hctx, err := l.TryLock(context.Background(), 10*time.Second, 0)
					if !assert.NoError(t, err) {
						return
					}
					tok, err := l.Token(hctx)
					assert.NoError(t, err)
					check.enter("g"+strconv.Itoa(g), hctx, tok)
					v, _ := rdb.Get(hctx, "dropped:n").Int()
					assert.NoError(t, rdb.Set(hctx, "dropped:n", v+1, 0).Err())
					assert.NoError(t, hctx.Err())
					check.exit(hctx)
					if rnd.IntN(2) == 0 {
						d.Arm("evalsha", 1)
					}
					assert.NoError(t, l.Unlock(hctx), "a replayed release is success")
				}
			}()
		}
		wg.Wait()
		n, err := rdb.Get(context.Background(), "dropped:n").Int()
		require.NoError(t, err)
		assert.Equal(t, goroutines*rounds, n)
		assert.Positive(t, droppers[0].Dropped()+droppers[1].Dropped())
		assert.Empty(t, k.state(t, rdb, k.keyOf(clients[0], "dropped")))

		// A renewal whose reply is lost is resent and still renews.
		c, d := clients[0], droppers[0]
		l := k.open(c, "dropped-renewal")
		hctx, err := l.Lock(context.Background())
		require.NoError(t, err)
		before := d.Dropped()
		d.Arm("evalsha", 1)
		c.WatchdogTick()
		require.Equal(t, before+1, d.Dropped(), "the renewal's reply was dropped")
		require.NoError(t, hctx.Err())
		assert.Greater(t, pttl(t, rdb, k.keyOf(c, "dropped-renewal")), lease-lease/3)
		require.NoError(t, l.Unlock(hctx))
	})
}

// buildHolder compiles internal/holderproc into the test's temporary
// directory.
func buildHolder(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "holderproc")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/holderproc").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// A holder process killed with SIGKILL releases nothing and renews nothing:
// its lock frees when the lease it last renewed runs out, and a waiter in
// another process gets it then.
func TestFaultHolderProcessKilled(t *testing.T) {
	noLeaks(t)
	bin := buildHolder(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	const lease = time.Second
	const name = "killed"

	cmd := exec.Command(bin, "-addr", srv.Addr(), "-name", name, "-lease", lease.String())
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	f := strings.Fields(line)
	require.Len(t, f, 3, line)
	require.Equal(t, "locked", f[0])
	procToken, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)

	c := relock.New(rdb, relock.WithWatchdogLease(lease))
	t.Cleanup(func() { _ = c.Close() })
	key := c.Lock(name).Key()
	h := assertHeldBy(t, rdb, key, f[2], 1)
	require.Equal(t, procToken, h.token)
	got := lockAsync(c.Lock(name))
	require.Eventually(t, func() bool { return c.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
	// The process renews while alive: its lease goes up again.
	ttl := pttl(t, rdb, key)
	require.Eventually(t, func() bool { return pttl(t, rdb, key) > ttl }, 5*time.Second, 5*time.Millisecond)
	mustNotGet(t, got)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	left := pttl(t, rdb, key)
	require.LessOrEqual(t, left, lease, "the lock frees within the lease it had")
	wctx := mustGet(t, got, left+2*time.Second)
	assert.Greater(t, token(t, c.Lock(name), wctx), procToken)
	assertHeldBy(t, rdb, key, ownerField(t, c, wctx), 1)
	require.NoError(t, c.Lock(name).Unlock(wctx))
	assert.Empty(t, heldKeys(t, rdb, defaultLatch))
}
