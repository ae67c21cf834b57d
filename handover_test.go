package relock_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/redistest"
)

// The hand-over across processes: a Lock's waiters queue in Redis (fields of
// the lock hash) and a release grants the lock to the first whose Client still
// listens, so one release wakes one waiter in one process.

// queueLen reads how many waiters are queued in the lock hash key.
func queueLen(t *testing.T, srv *redistest.Server, key string) int {
	t.Helper()
	return lockQueueLen(t, srv.Client(), key)
}

// startWaiterProcess starts internal/holderproc on name: a process of its
// own that waits for the lock (queued in Redis) and holds it once it has
// it, until it is killed. It returns the process and a channel that gets
// its "locked <token> <owner>" line.
func startWaiterProcess(t *testing.T, bin string, srv *redistest.Server, name string, lease time.Duration) (*exec.Cmd, <-chan string, <-chan struct{}) {
	t.Helper()
	return startHolderProcess(t, bin, "-addr", srv.Addr(), "-name", name, "-lease", lease.String())
}

// startHolderProcess is startWaiterProcess with holderproc's flags as given.
func startHolderProcess(t *testing.T, bin string, args ...string) (*exec.Cmd, <-chan string, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err == nil {
			lines <- line
		}
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd, lines, exited
}

// A waiter process killed with SIGKILL while queued is skipped at the next
// release: its Client's channel has no subscriber any more, so the release
// hands the lock to the next waiter at once. Bound: no delay at all (the
// hand-off is measured against the 30 s lease the fallback would take).
func TestHandOverSkipsAWaiterKilledWhileQueued(t *testing.T) {
	noLeaks(t)
	bin := buildHolder(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	const name = "handover-killed"
	holder := relock.New(rdb)
	t.Cleanup(func() { _ = holder.Close() })
	key := holder.Lock(name).Key()
	hctx, err := holder.Lock(name).Lock(context.Background())
	require.NoError(t, err)
	first := token(t, holder.Lock(name), hctx)

	proc, _, exited := startWaiterProcess(t, bin, srv, name, relock.DefaultWatchdogLease)
	require.Eventually(t, func() bool { return queueLen(t, srv, key) == 1 }, 10*time.Second, time.Millisecond)
	waiter := relock.New(srv.Client())
	t.Cleanup(func() { _ = waiter.Close() })
	got := lockAsync(waiter.Lock(name))
	require.Eventually(t, func() bool { return queueLen(t, srv, key) == 2 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)

	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	<-exited
	// Redis notices the closed connection at once; wait until it has.
	procChannels := func() int {
		chans, err := rdb.PubSubChannels(context.Background(), key+":w:*").Result()
		require.NoError(t, err)
		return len(chans)
	}
	require.Eventually(t, func() bool { return procChannels() == 1 }, 5*time.Second, time.Millisecond)

	unlocked := time.Now()
	require.NoError(t, holder.Lock(name).Unlock(hctx))
	wctx := mustGet(t, got, 2*time.Second)
	elapsed := time.Since(unlocked)
	t.Logf("hand-off past a killed waiter: %v", elapsed)
	assert.Less(t, elapsed, time.Second, "the hand-off took the fallback")
	assert.Greater(t, token(t, waiter.Lock(name), wctx), first)
	assertHeldBy(t, rdb, key, ownerField(t, waiter, wctx), 1)
	assert.Zero(t, queueLen(t, srv, key), "the killed waiter's entry is gone")
	require.NoError(t, waiter.Lock(name).Unlock(wctx))
	assert.Empty(t, heldKeys(t, rdb, defaultLatch))
}

// A waiter process that is frozen (SIGSTOP) while queued still has its
// connection, so the release grants it the lock: the stated limit is that
// the others then wait for the frozen waiter's lease, exactly as for a
// frozen holder. With a 1 s lease the next waiter gets the lock within it.
func TestHandOverToAFrozenWaiterLastsItsLease(t *testing.T) {
	noLeaks(t)
	bin := buildHolder(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	const name = "handover-frozen"
	const lease = time.Second
	holder := relock.New(rdb)
	t.Cleanup(func() { _ = holder.Close() })
	key := holder.Lock(name).Key()
	hctx, err := holder.Lock(name).Lock(context.Background())
	require.NoError(t, err)

	proc, _, _ := startWaiterProcess(t, bin, srv, name, lease)
	require.Eventually(t, func() bool { return queueLen(t, srv, key) == 1 }, 10*time.Second, time.Millisecond)
	waiter := relock.New(srv.Client())
	t.Cleanup(func() { _ = waiter.Close() })
	got := lockAsync(waiter.Lock(name))
	require.Eventually(t, func() bool { return queueLen(t, srv, key) == 2 }, 5*time.Second, time.Millisecond)

	require.NoError(t, proc.Process.Signal(syscall.SIGSTOP))
	unlocked := time.Now()
	require.NoError(t, holder.Lock(name).Unlock(hctx))
	h := readHold(t, rdb, key)
	require.Len(t, h.owners, 1, "granted to the frozen process")
	assert.NotContains(t, h.owners, ownerField(t, holder, hctx))
	mustNotGet(t, got)
	wctx := mustGet(t, got, lease+2*time.Second)
	t.Logf("hand-off past a frozen waiter with a %v lease: %v", lease, time.Since(unlocked))
	assertHeldBy(t, rdb, key, ownerField(t, waiter, wctx), 1)
	require.NoError(t, waiter.Lock(name).Unlock(wctx))
}

// Processes contending for one lock cost Redis a bounded number of commands
// per acquisition, flat in the number of processes: no waiter polls and no
// release wakes more than one. Every Client is a process of its own here
// (its own connections and subscriber).
func TestHandOverCommandsPerAcquisitionAcrossClients(t *testing.T) {
	for _, k := range []struct {
		kind  lockKind
		bound float64
	}{
		// Lock 11.15 at 4 and 16 processes: the waiter's attempt (EVALSHA,
		// HMGET, HSET of its entry, PTTL), and the release that hands over
		// (EVALSHA, HMGET of the hold with the entry its Client expects at
		// the queue's head, TIME for the token as every grant, PUBLISH,
		// HDEL of the freed hold and the entry, HSET of the new hold with
		// the latch that the lock's hash keeps, PEXPIRE); above 11, each
		// Client's first wait (SUBSCRIBE, and the attempt after it) and a
		// hold not handed from the queue (a second HMGET, of the queue's
		// head). FairLock
		// 15.9: its hash keeps its token and
		// latch as a Lock's, and its queue is a key of its own (the
		// waiter's ZADD and the queue's lifetime, the hand-over's ZRANGE
		// and ZREM).
		{exclusiveKinds[0], 11.5}, // Lock
		{exclusiveKinds[1], 16.5}, // FairLock
		// RWLock's writers: 15.3 at 4 and 16 processes: the waiter's
		// attempt (EVALSHA, TIME, HGETALL, ZADD of its entry in the
		// queue's sorted set, HSET of the hash's mark of the queue), and
		// the release that hands over (EVALSHA, TIME, HGETALL,
		// ZRANGEBYSCORE of the queue's head, PUBLISH, HDEL of the freed
		// hold, HSET of the new hold with the mark and the latch slot,
		// PEXPIRE, the tail's HSET and PEXPIRE; an eighth of a
		// ZREMRANGEBYSCORE). Before the hand-over (writers woken on a
		// broadcast channel, claims in a sorted set) 47.6 and 111.1.
		{exclusiveKinds[2], 16},
	} {
		t.Run(k.kind.name, func(t *testing.T) {
			srv := redistest.Start(t)
			for _, procs := range []int{4, 16} {
				n := commandsPerContendedAcquisition(t, srv, k.kind, procs)
				t.Logf("%s, %d processes: %.2f commands run by Redis per acquisition", k.kind.name, procs, n)
				assert.LessOrEqual(t, n, k.bound, "%d processes", procs)
			}
		})
	}
}

// An uncontended Lock+Unlock costs Redis a fixed number of commands, the
// two script calls included, and publishes nothing: nobody waits. Lock: the
// acquire's HMGET (the last token with the rest), TIME, HSET, PEXPIRE; the
// release's HMGET, HDEL of the hold's fields, HSET (the op in the latch
// slot after the last, that slot's name) and PEXPIRE: a free Lock's hash
// keeps its token and latch (see release_common.lua). A FairLock's the
// same: its acquire checks its queue key (EXISTS) only when its hash is
// gone, and its release reads the queue only when the hold is marked as
// having waiters (see fair_acquire.lua, fair_common.lua). An RWLock's write hold: the acquire's HGETALL, TIME
// (deadlines and token alike), HMGET of the tail's token and latch slot,
// HSET, PEXPIRE; the release's HGETALL, TIME, two DELs (the hash, then
// the writers' queue: one key per command, which a Cluster master
// importing the slot needs when one of them is missing) and the tail's
// HSET and PEXPIRE: the hash carries the tail's latch slot (see
// rw_common.lua, rw_token).
func TestUncontendedCommandsPerCycle(t *testing.T) {
	srv := redistest.Start(t)
	for _, k := range []struct {
		kind lockKind
		want int64
	}{
		{exclusiveKinds[0], 10},
		{exclusiveKinds[1], 10},
		{exclusiveKinds[2], 13},
	} {
		t.Run(k.kind.name, func(t *testing.T) {
			c := relock.New(srv.Client())
			t.Cleanup(func() { _ = c.Close() })
			l := k.kind.open(c, "alone-"+k.kind.name)
			cycle := func() {
				ctx, err := l.Lock(context.Background())
				require.NoError(t, err)
				require.NoError(t, l.Unlock(ctx))
			}
			cycle() // loads the scripts: NOSCRIPT replies do not count
			// The Client's presence subscription (made once, after its first
			// hold) is not a cycle's either.
			presence := "relock:client:" + c.ID()
			require.Eventually(t, func() bool {
				return srv.Client().PubSubNumSub(context.Background(), presence).Val()[presence] == 1
			}, 5*time.Second, time.Millisecond)
			const cycles = 20
			before := lockCommands(t, srv)
			for range cycles {
				cycle()
			}
			after := lockCommands(t, srv)
			diff := map[string]int64{}
			for name, n := range after {
				if n != before[name] {
					diff[name] = n - before[name]
				}
			}
			assert.Equal(t, k.want*cycles, sum(after)-sum(before), "commands run by Redis in %d cycles: %v", cycles, diff)
			assert.Equal(t, before["publish"], after["publish"], "a release with nobody waiting published")
		})
	}
}

// commandsPerContendedAcquisition has procs Clients take the lock of kind 30
// times each, with a 200 µs critical section, and returns the commands
// Redis ran per acquisition.
func commandsPerContendedAcquisition(t *testing.T, srv *redistest.Server, kind lockKind, procs int) float64 {
	const rounds = 30
	clients := make([]*relock.Client, procs)
	for i := range clients {
		clients[i] = relock.New(srv.Client())
		t.Cleanup(func() { _ = clients[i].Close() })
	}
	// Load the scripts, so that NOSCRIPT replies do not count.
	warm, err := kind.open(clients[0], "warm").Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, kind.open(clients[0], "warm").Unlock(warm))
	before := commandTotal(t, srv)
	counter := 0
	done := make(chan struct{})
	for _, c := range clients {
		go func() {
			defer func() { done <- struct{}{} }()
			l := kind.open(c, "crowd")
			for range rounds {
				ctx, err := l.Lock(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				v := counter
				time.Sleep(200 * time.Microsecond)
				counter = v + 1
				assert.NoError(t, l.Unlock(ctx))
			}
		}()
	}
	for range clients {
		<-done
	}
	require.Equal(t, procs*rounds, counter, "two holders at once")
	n := float64(commandTotal(t, srv)-before) / float64(procs*rounds)
	assert.Empty(t, heldKeys(t, srv.Client(), defaultLatch))
	return n
}

// commandTotal is the number of commands the server has run for the locks,
// those run by scripts included.
func commandTotal(t *testing.T, srv *redistest.Server) int64 {
	return sum(lockCommands(t, srv))
}

// lockCommands is INFO commandstats' calls per command, less the commands
// counting makes itself (each count opens a connection: HELLO, CLIENT
// SETINFO where the server has it, INFO).
func lockCommands(t *testing.T, srv *redistest.Server) map[string]int64 {
	t.Helper()
	m, err := redistest.CommandCalls(context.Background(), srv.Client())
	require.NoError(t, err)
	delete(m, "info")
	return redistest.DropConnectionSetup(m)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// A TryLock that does not wait (wait 0) finding the lock busy is one script
// call and leaves nothing behind: it does not queue, so there is nothing to
// take back.
func TestTryLockWithoutWaitDoesNotQueue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	holder := relock.New(rdb)
	t.Cleanup(func() { _ = holder.Close() })
	other := relock.New(srv.Client())
	t.Cleanup(func() { _ = other.Close() })
	const name = "no-wait"
	hctx, err := holder.Lock(name).Lock(context.Background())
	require.NoError(t, err)
	_, err = other.Lock(name).TryLock(context.Background(), 0, 0) // loads the scripts
	require.ErrorIs(t, err, relock.ErrNotObtained)

	calls := func() int64 {
		m, err := redistest.CommandCalls(context.Background(), rdb)
		require.NoError(t, err)
		return m["evalsha"] + m["eval"]
	}
	before := calls()
	_, err = other.Lock(name).TryLock(context.Background(), 0, 0)
	require.ErrorIs(t, err, relock.ErrNotObtained)
	assert.Equal(t, before+1, calls(), "one attempt, no abandon")
	assert.Zero(t, queueLen(t, srv, holder.Lock(name).Key()), "nothing queued")
	require.NoError(t, holder.Lock(name).Unlock(hctx))
}

// On a Cluster, sharded pub/sub (relock's default there) counts the
// receivers of the channel's own shard, so a waiter process killed while
// queued is skipped at once, as on one server. With classic pub/sub
// (WithShardedPubSub(false)) PUBLISH counts one node's receivers only, and
// the release hands the lock to the first queued waiter whether it listens
// or not: the stated limit is that a killed waiter then delays the others by
// its lease (1 s here), never more.
func TestHandOverPastAKilledWaiterOnACluster(t *testing.T) {
	noLeaks(t)
	bin := buildHolder(t)
	cl := redistest.StartCluster(t, 3, 0)
	addrs := strings.Join(cl.Addrs(), ",")
	const lease = time.Second
	for _, tc := range []struct {
		kind    lockKind
		classic bool
	}{
		{exclusiveKinds[0], false},
		{exclusiveKinds[1], false},
		{exclusiveKinds[0], true},
	} {
		mode := map[bool]string{false: "Sharded", true: "Classic"}[tc.classic]
		t.Run(mode+"/"+tc.kind.name, func(t *testing.T) {
			var opts []relock.Option
			args := []string{"-cluster", "-addr", addrs, "-name", "cl-killed-" + mode, "-lease", lease.String(),
				"-kind", map[string]string{"Lock": "lock", "FairLock": "fair"}[tc.kind.name]}
			if tc.classic {
				opts = append(opts, relock.WithShardedPubSub(false))
				args = append(args, "-classic")
			}
			name := "cl-killed-" + mode
			holder := relock.New(cl.Client(), append(opts, relock.WithWatchdogLease(lease))...)
			t.Cleanup(func() { _ = holder.Close() })
			hctx, err := tc.kind.open(holder, name).Lock(context.Background())
			require.NoError(t, err)
			queued := func() []inspect.Waiter {
				st, err := holder.Inspect(context.Background(), name)
				require.NoError(t, err)
				switch {
				case st.Lock != nil:
					return st.Lock.Queued
				case st.FairLock != nil:
					return st.FairLock.Waiters
				}
				return nil
			}

			proc, _, exited := startHolderProcess(t, bin, args...)
			require.Eventually(t, func() bool { return len(queued()) == 1 }, 10*time.Second, time.Millisecond)
			dead, _, _ := strings.Cut(queued()[0].Owner, ":") // the killed process's Client
			waiter := relock.New(cl.Client(), append(opts, relock.WithWatchdogLease(lease))...)
			t.Cleanup(func() { _ = waiter.Close() })
			got := lockAsync(tc.kind.open(waiter, name))
			require.Eventually(t, func() bool { return len(queued()) == 2 }, 5*time.Second, time.Millisecond)
			require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
			<-exited
			// The kernel closed the killed process's connections; wait until
			// no node counts its subscription any more.
			channel := tc.kind.keyOf(holder, name) + ":w:" + dead
			require.Eventually(t, func() bool { return subscribers(t, cl, channel) == 0 }, 5*time.Second, 5*time.Millisecond)

			unlocked := time.Now()
			require.NoError(t, tc.kind.open(holder, name).Unlock(hctx))
			wctx := mustGet(t, got, lease+3*time.Second)
			elapsed := time.Since(unlocked)
			t.Logf("%s %s on a Cluster: hand-off past a killed waiter %v", mode, tc.kind.name, elapsed)
			if tc.classic || !redistest.ShardedPubSub(context.Background(), cl.Nodes[0].Client()) {
				// Classic pub/sub: forced, or the server has no other (Redis 6.2).
				assert.Less(t, elapsed, lease+time.Second, "bounded by the killed waiter's lease")
			} else {
				assert.Less(t, elapsed, lease/2, "the hand-over skipped the killed waiter")
			}
			require.NoError(t, tc.kind.open(waiter, name).Unlock(wctx))
		})
	}
}

// subscribers counts the subscriptions of channel, classic and sharded
// (where the server has it), on every node of cl.
func subscribers(t *testing.T, cl *redistest.Cluster, channel string) int64 {
	t.Helper()
	subs := []string{"numsub"}
	if redistest.ShardedPubSub(context.Background(), cl.Nodes[0].Client()) {
		subs = append(subs, "shardnumsub")
	}
	var n int64
	for _, node := range cl.Nodes {
		for _, sub := range subs {
			v, err := node.Client().Do(context.Background(), "pubsub", sub, channel).Slice()
			require.NoError(t, err)
			if len(v) == 2 {
				c, _ := v[1].(int64)
				n += c
			}
		}
	}
	return n
}
