package relock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// commands returns the number of commands clients have sent to the backend
// (script calls, subscriptions), not counting the INFO calls that measure it
// nor what scripts run inside Redis. miniredis counts everything.
func commands(t *testing.T, b *backend) int64 {
	t.Helper()
	if b.mini != nil {
		return int64(b.mini.CommandCount())
	}
	calls, err := redistest.CommandCalls(context.Background(), b.rdb)
	require.NoError(t, err)
	return redistest.ClientCommands(nil, calls)
}

// Two processes × 50 goroutines take one lock in turn. Every one gets it, the
// unprotected counter is exact, and Redis sees no polling: a waiter costs a
// few commands per acquisition, not one per retry interval.
func TestContentionWithoutPolling(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		// The first Unlocks queue behind the other goroutines' first
		// acquires; on miniredis under -race on a loaded machine each script
		// takes milliseconds, which can pass the default 1 s unlock bound.
		// That bound has its own tests (deadline_test.go); here an
		// unconfirmed Unlock would only be noise.
		slow := relock.WithUnlockTimeout(30 * time.Second)
		clients := []*relock.Client{b.newClient(t, slow), relock.New(b.newConn(t), slow)}
		t.Cleanup(func() { _ = clients[1].Close() })
		const perClient, rounds = 50, 4
		before := commands(t, b)
		counter := 0
		var wg sync.WaitGroup
		for i := range 2 * perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := clients[i%2].Lock("hot")
				for range rounds {
					ctx, err := l.Lock(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					v := counter
					time.Sleep(100 * time.Microsecond) // widen the race window
					counter = v + 1
					assert.NoError(t, l.Unlock(ctx))
				}
			}()
		}
		wg.Wait()
		acquisitions := 2 * perClient * rounds
		assert.Equal(t, acquisitions, counter)
		assert.Empty(t, heldKeys(t, b.rdb, defaultLatch), "only tails and latches are left")
		if !b.real() {
			return // miniredis counts the commands inside scripts too
		}
		perAcq := float64(commands(t, b)-before) / float64(acquisitions)
		t.Logf("%.2f Redis commands per acquisition (Unlock included)", perAcq)
		// Polling every few milliseconds would cost tens per acquisition.
		assert.Less(t, perAcq, 6.0, "waiters poll")
		for _, c := range clients {
			require.Eventually(t, func() bool { return c.SubscribedChannels() == 0 }, 5*time.Second, time.Millisecond)
		}
	})
}

// An unlock wakes one local waiter, not the herd: with ten waiting, one
// unlock costs the release alone, which hands the lock over to the first.
func TestUnlockWakesOneLocalWaiter(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	l := c.Lock("herd")
	warm, err := l.Lock(context.Background()) // the server learns the scripts
	require.NoError(t, err)
	require.NoError(t, l.Unlock(warm))
	holder, err := l.Lock(context.Background())
	require.NoError(t, err)

	const waiters = 10
	got := make(chan context.Context, waiters)
	for range waiters {
		go func() {
			ctx, err := l.Lock(context.Background())
			if err == nil {
				got <- ctx
			}
		}()
	}
	// All are asleep: each made its attempt, the subscription is confirmed and
	// re-checked, and nothing moves any more.
	require.Eventually(t, func() bool { return c.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
	settle(t, b)
	calls := func() int64 {
		m, err := redistest.CommandCalls(context.Background(), b.rdb)
		require.NoError(t, err)
		return m["evalsha"]
	}
	before := calls()
	require.NoError(t, l.Unlock(holder))
	next := <-got
	settle(t, b)
	assert.Equal(t, int64(1), calls()-before, "the release alone: it hands the lock over")
	assert.Len(t, got, 0, "the others still wait")

	// Hand the lock down the line; everyone gets it exactly once.
	for range waiters - 1 {
		require.NoError(t, l.Unlock(next))
		next = <-got
	}
	require.NoError(t, l.Unlock(next))
	require.Eventually(t, func() bool { return c.SubscribedChannels() == 0 }, 5*time.Second, time.Millisecond)
}

// settle waits until the server's command count stops moving: every waiter
// has made its attempts and is asleep.
func settle(t *testing.T, b *backend) {
	t.Helper()
	last := commands(t, b)
	stable := 0
	require.Eventually(t, func() bool {
		n := commands(t, b)
		if n == last {
			stable++
		} else {
			stable, last = 0, n
		}
		return stable >= 5
	}, 10*time.Second, 20*time.Millisecond)
}

// A thousand goroutines wait on a thousand different locks through one
// subscriber connection, and leave nothing subscribed behind.
func TestThousandWaitersShareOneConnection(t *testing.T) {
	b := newReal(t)
	holderClient := relock.New(b.newConn(t))
	t.Cleanup(func() { _ = holderClient.Close() })
	c := b.newClient(t)
	ctx := context.Background()
	const n = 1000
	holds := make([]context.Context, n)
	for i := range n {
		var err error
		holds[i], err = holderClient.Lock(fmt.Sprintf("many:%d", i)).Lock(ctx)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	acquired := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := c.Lock(fmt.Sprintf("many:%d", i))
			held, err := l.Lock(ctx)
			if assert.NoError(t, err) {
				acquired <- struct{}{}
				assert.NoError(t, l.Unlock(held))
			}
		}()
	}
	require.Eventually(t, func() bool { return c.SubscribedChannels() == n }, 30*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		chans, err := b.rdb.PubSubChannels(ctx, "relock:{*").Result() // lock channels, not Clients' presence
		return err == nil && len(chans) == n
	}, 30*time.Second, 5*time.Millisecond)
	// One subscriber connection per Client: the waiting Client's carries all
	// 1,000 channels (and, once it holds, its presence channel); the other
	// is the holding Client's presence connection.
	assert.Equal(t, 2, pubsubConnections(t, b), "one subscriber connection per Client, shared by all its waiters")
	first, last := "relock:{many:0}:w:"+c.ID(), "relock:{many:999}:w:"+c.ID()
	counts, err := b.rdb.PubSubNumSub(ctx, first, last).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{first: 1, last: 1}, counts)

	for i := range n {
		require.NoError(t, holderClient.Lock(fmt.Sprintf("many:%d", i)).Unlock(holds[i]))
	}
	wg.Wait()
	assert.Len(t, acquired, n)
	// Unused hand-over channels linger a moment (channelLinger), then go.
	require.Eventually(t, func() bool { return c.SubscribedChannels() == 0 }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		chans, err := b.rdb.PubSubChannels(ctx, "relock:{*").Result()
		return err == nil && len(chans) == 0
	}, 10*time.Second, 5*time.Millisecond, "no lock channel left subscribed")
}

// pubsubConnections counts the server's connections in pub/sub mode.
func pubsubConnections(t *testing.T, b *backend) int {
	t.Helper()
	list, err := b.rdb.ClientList(context.Background()).Result()
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, " sub=") && !strings.Contains(line, " sub=0 ") ||
			strings.Contains(line, " ssub=") && !strings.Contains(line, " ssub=0 ") {
			n++
		}
	}
	return n
}

// A waiter that gives up leaves the lock's queue at once; its Client's
// channel lingers unused for a moment (channelLinger: the next wait reuses
// it), then is unsubscribed.
func TestShortWaitGivesUpPromptlyAndUnsubscribes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		c := b.newClient(t)
		holder, err := c.Lock("short").Lock(context.Background())
		require.NoError(t, err)
		start := time.Now()
		_, err = c.Lock("short").TryLock(context.Background(), 50*time.Millisecond, 0)
		elapsed := time.Since(start)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		assert.Less(t, elapsed, 5*time.Second, "gave up long after its wait time")
		q, err := b.rdb.HGet(context.Background(), c.Lock("short").Key(), "~q").Result()
		assert.Empty(t, q, "the waiter left the queue (%v)", err)
		ch := "relock:{short}:w:" + c.ID()
		require.Eventually(t, func() bool { return c.SubscribedChannels() == 0 }, 5*time.Second, time.Millisecond)
		require.Eventually(t, func() bool {
			n, err := b.rdb.PubSubNumSub(context.Background(), ch).Result()
			return err == nil && n[ch] == 0
		}, 5*time.Second, time.Millisecond)

		// A context that ends gives up the same way, and says why.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = c.Lock("short").Lock(ctx)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Eventually(t, func() bool { return c.SubscribedChannels() == 0 }, 5*time.Second, time.Millisecond)
		require.NoError(t, c.Lock("short").Unlock(holder))
	})
}

// The subscriber connection is killed and the unlock is published while it is
// down, so its message is lost. The reconnection's re-subscription makes the
// waiters re-check: they get the lock long before the holder's 30 s lease.
func TestLostMessageDuringReconnectDoesNotStrandWaiters(t *testing.T) {
	b := newReal(t)
	holderClient := relock.New(b.newConn(t))
	t.Cleanup(func() { _ = holderClient.Close() })
	c := b.newClient(t)
	ctx := context.Background()
	holder, err := holderClient.Lock("reconnect").Lock(ctx)
	require.NoError(t, err)

	got := make(chan error, 2)
	for range 2 {
		go func() {
			held, err := c.Lock("reconnect").Lock(ctx)
			if err == nil {
				err = c.Lock("reconnect").Unlock(held)
			}
			got <- err
		}()
	}
	// Both waiters queued in Redis and asleep on their Client's channel,
	// which is subscribed. (Counting pub/sub connections cannot tell: the
	// holder's Client keeps one of its own from its first hold.)
	channel := "relock:{reconnect}:w:" + c.ID()
	require.Eventually(t, func() bool {
		return c.QueuedWaiters(channel) == 2 && queueLen(t, b.srv, c.Lock("reconnect").Key()) == 2 &&
			b.rdb.PubSubNumSub(ctx, channel).Val()[channel] == 1
	}, 5*time.Second, time.Millisecond)

	admin := b.newConn(t)
	require.NoError(t, admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.NoError(t, holderClient.Lock("reconnect").Unlock(holder)) // published to nobody, most likely

	// A hand-off after the reconnection, not the 30 s lease the waiters
	// would otherwise sleep: 5 s leaves room for go-redis's reconnect on a
	// loaded machine.
	deadline := time.After(5 * time.Second)
	for range 2 {
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-deadline:
			t.Fatal("a waiter was stranded after the subscriber reconnected")
		}
	}
}

// Waiters queue in Redis in the order they came, each with the one attempt
// that found the lock busy, and the releases hand the lock down the line in
// that order with no attempt at all.
func TestWaitersQueueInOrderAndAreHandedTheLock(t *testing.T) {
	b := newReal(t)
	c := b.newClient(t)
	l := c.Lock("line")
	channel := "relock:{line}:w:" + c.ID()
	// Load the scripts first: a NOSCRIPT reply would count as an EVALSHA.
	warm, err := l.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(warm))
	holder, err := l.Lock(context.Background())
	require.NoError(t, err)

	order := make(chan int, 6)
	held := make(chan context.Context)
	start := func(i int) {
		go func() {
			ctx, err := l.Lock(context.Background())
			if assert.NoError(t, err) {
				order <- i
				held <- ctx
			}
		}()
	}
	start(0)
	require.Eventually(t, func() bool { return c.QueuedWaiters(channel) == 1 }, 5*time.Second, time.Millisecond)
	settle(t, b)
	evalsha := func() int64 {
		m, err := redistest.CommandCalls(context.Background(), b.rdb)
		require.NoError(t, err)
		return m["evalsha"]
	}
	before := evalsha()
	for i := 1; i < 6; i++ {
		start(i)
		require.Eventually(t, func() bool { return c.QueuedWaiters(channel) == i+1 }, 5*time.Second, time.Millisecond)
	}
	assert.Equal(t, before+5, evalsha(), "one attempt per newcomer")

	before = evalsha()
	require.NoError(t, l.Unlock(holder))
	for want := range 6 {
		assert.Equal(t, want, <-order)
		require.NoError(t, l.Unlock(<-held))
	}
	assert.Equal(t, before+7, evalsha(), "seven releases (six hand over), no attempt")
	assert.Empty(t, heldKeys(t, b.rdb, defaultLatch), "nothing is left but tails and latches")
}
