package relock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/inspect"
)

// The inspection tests take locks through the public API and check what
// Inspect reports, so they hold whatever layout the scripts write. Only
// TestInspectLayouts writes hashes by hand, to pin both the layout of older
// versions and the current one.

func TestInspectLock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		c := b.newClient(t)
		l := c.Lock("inspect/lock")
		outer, err := l.Lock(ctx)
		require.NoError(t, err)
		hctx, err := l.Lock(outer) // re-entry
		require.NoError(t, err)
		token, err := l.Token(hctx)
		require.NoError(t, err)

		st, err := c.Inspect(ctx, "inspect/lock")
		require.NoError(t, err)
		assert.Equal(t, "inspect/lock", st.Name)
		assert.Equal(t, []inspect.Kind{inspect.KindLock}, st.Kinds())
		assert.True(t, st.Exists())
		assert.WithinDuration(t, time.Now(), st.ServerTime, 5*time.Second)
		require.NotNil(t, st.Lock)
		assert.Equal(t, l.Key(), st.Lock.Key)
		require.Len(t, st.Lock.Holders, 1)
		h := st.Lock.Holders[0]
		assert.Equal(t, ownerField(t, c, hctx), h.Owner)
		assert.Equal(t, 2, h.Count)
		assert.Greater(t, h.Lease, time.Duration(0))
		assert.LessOrEqual(t, h.Lease, relock.DefaultWatchdogLease)
		assert.Equal(t, h.Lease, st.Lock.Lease)
		assert.Equal(t, token, st.Lock.Token)
		assert.NotZero(t, token)

		require.NoError(t, l.Unlock(hctx))
		require.NoError(t, l.Unlock(outer))
		st, err = c.Inspect(ctx, "inspect/lock")
		require.NoError(t, err)
		assert.False(t, st.Exists())
		assert.Nil(t, st.Lock)
		assert.Empty(t, st.Kinds())
	})
}

func TestInspectFencingOff(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t, relock.WithFencingTokens(false))
	hctx, err := c.Lock("inspect/nofence").Lock(ctx)
	require.NoError(t, err)
	st, err := c.Inspect(ctx, "inspect/nofence")
	require.NoError(t, err)
	require.NotNil(t, st.Lock)
	assert.Len(t, st.Lock.Holders, 1)
	assert.Zero(t, st.Lock.Token)
	require.NoError(t, c.Lock("inspect/nofence").Unlock(hctx))
}

func TestInspectUnknownAndInvalid(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	st, err := c.Inspect(ctx, "inspect/nobody")
	require.NoError(t, err)
	assert.False(t, st.Exists())
	assert.Equal(t, "inspect/nobody", st.Name)

	_, err = c.Inspect(ctx, "")
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	_, err = c.Channels("")
	assert.ErrorIs(t, err, relock.ErrInvalidArgument)

	// A foreign key of another type where a lock would be reads as absent.
	require.NoError(t, b.rdb.Set(ctx, "relock:{inspect/foreign}", "x", 0).Err())
	st, err = c.Inspect(ctx, "inspect/foreign")
	require.NoError(t, err)
	assert.False(t, st.Exists())
}

func TestInspectFairLockWaiters(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	const name = "inspect/fair"
	l := c.FairLock(name)
	hctx, err := l.Lock(ctx)
	require.NoError(t, err)

	var wg sync.WaitGroup
	waiters := make([]*relock.Client, 2)
	for i := range waiters {
		waiters[i] = b.newClient(t)
		wg.Add(1)
		go func(w *relock.Client) {
			defer wg.Done()
			wctx, err := w.FairLock(name).Lock(ctx)
			if assert.NoError(t, err) {
				assert.NoError(t, w.FairLock(name).Unlock(wctx))
			}
		}(waiters[i])
		// Queue them one after the other, so their order is known.
		require.Eventually(t, func() bool {
			st, err := c.Inspect(ctx, name)
			return err == nil && st.FairLock != nil && len(st.FairLock.Waiters) == i+1
		}, 5*time.Second, 10*time.Millisecond)
	}

	st, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, []inspect.Kind{inspect.KindFairLock}, st.Kinds())
	f := st.FairLock
	require.NotNil(t, f)
	assert.Equal(t, l.Key(), f.Key)
	assert.Equal(t, l.QueueKey(), f.QueueKey)
	require.Len(t, f.Holders, 1)
	assert.Equal(t, ownerField(t, c, hctx), f.Holders[0].Owner)
	assert.Equal(t, 1, f.Holders[0].Count)
	assert.Greater(t, f.Lease, time.Duration(0))
	token, err := l.Token(hctx)
	require.NoError(t, err)
	assert.Equal(t, token, f.Token)
	require.Len(t, f.Waiters, 2)
	for i, w := range f.Waiters {
		assert.True(t, strings.HasPrefix(w.Owner, waiters[i].ID()+":"), "waiter %d is %s", i, w.Owner)
		// No deadline of its own: a waiter whose Client stops listening is
		// skipped by the next hand-over.
		assert.True(t, w.Deadline.IsZero(), "deadline %v", w.Deadline)
		assert.Zero(t, w.Remaining)
	}

	require.NoError(t, l.Unlock(hctx))
	wg.Wait()
	st, err = c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.False(t, st.Exists())
}

func TestInspectRWLock(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	const name = "inspect/rw"
	rw := c.RWLock(name)

	r1outer, err := rw.ReadLock().Lock(ctx)
	require.NoError(t, err)
	r1, err := rw.ReadLock().Lock(r1outer)
	require.NoError(t, err)
	r2, err := rw.ReadLock().TryLock(ctx, 0, time.Minute)
	require.NoError(t, err)

	writer := b.newClient(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wctx, err := writer.RWLock(name).WriteLock().Lock(ctx)
		if assert.NoError(t, err) {
			assert.NoError(t, writer.RWLock(name).WriteLock().Unlock(wctx))
		}
	}()
	require.Eventually(t, func() bool {
		st, err := c.Inspect(ctx, name)
		return err == nil && st.RWLock != nil && len(st.RWLock.WritersWaiting) == 1
	}, 5*time.Second, 10*time.Millisecond)

	st, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, []inspect.Kind{inspect.KindRWLock}, st.Kinds())
	s := st.RWLock
	require.NotNil(t, s)
	assert.Equal(t, rw.Key(), s.Key)
	assert.Nil(t, s.Writer)
	assert.Zero(t, s.Token)
	want := map[string]int{ownerField(t, c, r1): 2, ownerField(t, c, r2): 1}
	got := map[string]int{}
	for _, h := range s.Readers {
		got[h.Owner] = h.Count
		assert.Greater(t, h.Lease, time.Duration(0))
		if h.Owner == ownerField(t, c, r2) {
			assert.Greater(t, h.Lease, 50*time.Second, "its own explicit lease")
		} else {
			assert.LessOrEqual(t, h.Lease, relock.DefaultWatchdogLease)
		}
	}
	assert.Equal(t, want, got)
	require.Len(t, s.WritersWaiting, 1)
	assert.True(t, strings.HasPrefix(s.WritersWaiting[0].Owner, writer.ID()+":"))
	assert.Greater(t, s.WritersWaiting[0].Remaining, time.Duration(0))

	require.NoError(t, rw.ReadLock().Unlock(r1))
	require.NoError(t, rw.ReadLock().Unlock(r1outer))
	require.NoError(t, rw.ReadLock().Unlock(r2))
	<-done

	// The write side: writer and token.
	wctx, err := rw.WriteLock().Lock(ctx)
	require.NoError(t, err)
	token, err := rw.WriteLock().Token(wctx)
	require.NoError(t, err)
	st, err = c.Inspect(ctx, name)
	require.NoError(t, err)
	require.NotNil(t, st.RWLock)
	require.NotNil(t, st.RWLock.Writer)
	assert.Equal(t, ownerField(t, c, wctx), st.RWLock.Writer.Owner)
	assert.Equal(t, 1, st.RWLock.Writer.Count)
	assert.Greater(t, st.RWLock.Writer.Lease, time.Duration(0))
	assert.Equal(t, token, st.RWLock.Token)
	assert.Empty(t, st.RWLock.Readers)
	require.NoError(t, rw.WriteLock().Unlock(wctx))
}

func TestInspectSeveralKinds(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	const name = "inspect/all"
	l1, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)
	l2, err := c.FairLock(name).Lock(ctx)
	require.NoError(t, err)
	l3, err := c.RWLock(name).ReadLock().Lock(ctx)
	require.NoError(t, err)
	st, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, []inspect.Kind{inspect.KindLock, inspect.KindFairLock, inspect.KindRWLock}, st.Kinds())
	require.NoError(t, c.Lock(name).Unlock(l1))
	require.NoError(t, c.FairLock(name).Unlock(l2))
	require.NoError(t, c.RWLock(name).ReadLock().Unlock(l3))
}

// A free FairLock's hash lives on for the unlock latch: with waiters
// queued (its last holder's lease ran out while they queued), Inspect
// shows them, and no lease.
func TestInspectFreeFairLockWithWaiters(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	entry := func(fields ...string) string { return strings.Join(fields, "\x00") + "\x00" }
	require.NoError(t, b.rdb.HSet(ctx, "relock:{freefair}:fair", "~t", "99", "~r", entry("op1"), "~n", "\x01").Err())
	require.NoError(t, b.rdb.PExpire(ctx, "relock:{freefair}:fair", 30*time.Second).Err())
	require.NoError(t, b.rdb.ZAdd(ctx, "relock:{freefair}:fair:z", redis.Z{Score: 1, Member: entry("u4:1", "30000", "1", "u4:1")}).Err())
	require.NoError(t, b.rdb.PExpire(ctx, "relock:{freefair}:fair:z", 10*time.Second).Err())
	st, err := c.Inspect(ctx, "freefair")
	require.NoError(t, err)
	require.NotNil(t, st.FairLock)
	assert.Empty(t, st.FairLock.Holders)
	assert.Zero(t, st.FairLock.Lease, "the latch's time is no lease")
	assert.Equal(t, []inspect.Waiter{{Owner: "u4:1"}}, st.FairLock.Waiters)
}

// TestInspectLayout pins the layout Inspect reads, written by hand: owner →
// count with "~" metadata fields (token ~t, a Lock's queue: ~q, ~#<k> and
// ~@<id>), a FairLock's queue in a sorted set of its own, and per-owner RW
// fields with the writers' queue in a sorted set beside them (~q its mark).
func TestInspectLayout(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	rdb := b.rdb
	now := time.Now().UnixMilli() // loopback server: same clock
	entry := func(fields ...string) string { return strings.Join(fields, "\x00") + "\x00" }

	// The Lock's queue in fields of its hash, its head (position 4) behind
	// a hole left by a waiter that gave up (position 3).
	require.NoError(t, rdb.HSet(ctx, "relock:{new}", "u1:1", "2", "~g", "op1", "~o", "op2", "~t", "1700000000000001",
		"~q", "3 10 2", "~#10", entry("u9:2", "30000", "1", "u9:2"), "~@u9:2", "10",
		"~#4", entry("u9:1", "30000", "1", "u9:1"), "~@u9:1", "4").Err())
	require.NoError(t, rdb.PExpire(ctx, "relock:{new}", 20*time.Second).Err())
	require.NoError(t, rdb.HSet(ctx, "relock:{new}:fair", "u3:1", "1", "~g", "op3", "~o", "op3", "~t", "99", "~q", "1").Err())
	require.NoError(t, rdb.PExpire(ctx, "relock:{new}:fair", 20*time.Second).Err())
	require.NoError(t, rdb.ZAdd(ctx, "relock:{new}:fair:z", redis.Z{Score: 2, Member: entry("u5:1", "30000", "1", "u5:1")},
		redis.Z{Score: 1, Member: entry("u4:1", "30000", "1", "u4:1")}).Err())
	require.NoError(t, rdb.PExpire(ctx, "relock:{new}:fair:z", 10*time.Second).Err())
	require.NoError(t, rdb.HSet(ctx, "relock:{new}:rw",
		"r:u6:1", "2", "rd:u6:1", now+15000, "rg:u6:1", "op6", "ro:u6:1", "op7",
		"r:dead:1", "1", "rd:dead:1", now-5000,
		"w:u7:1", "1", "wd:u7:1", now+25000, "wg:u7:1", "op8", "wo:u7:1", "op8", "~t", "1700000000000002",
		"~q", "2 "+strconv.FormatInt(now+8000, 10)+" 2 1").Err())
	// u7:1 was granted the write hold: its entry, below the head, waits
	// for the sweep (see rw_common.lua, wq_reader).
	require.NoError(t, rdb.ZAdd(ctx, "relock:{new}:rw:q", redis.Z{Score: 2, Member: entry("u8:1", "30000", "1", "u8:1")},
		redis.Z{Score: 1, Member: entry("op8", "30000", "1", "u7:1")}).Err())
	// A queue whose claim lapsed (its writers died): the key outlives its
	// deadline here only because the test wrote it so.
	require.NoError(t, rdb.HSet(ctx, "relock:{lapsed}:rw", "r:u6:1", "1", "rd:u6:1", now+15000, "rg:u6:1", "op6",
		"~q", "1 "+strconv.FormatInt(now-1000, 10)+" 1 1").Err())
	require.NoError(t, rdb.ZAdd(ctx, "relock:{lapsed}:rw:q", redis.Z{Score: 1, Member: entry("lapsed:1", "30000", "1", "lapsed:1")}).Err())
	st, err := c.Inspect(ctx, "new")
	require.NoError(t, err)
	require.NotNil(t, st.Lock)
	require.Len(t, st.Lock.Holders, 1, "metadata fields are not holders")
	assert.Equal(t, "u1:1", st.Lock.Holders[0].Owner)
	assert.Equal(t, 2, st.Lock.Holders[0].Count)
	assert.InDelta(t, 20*time.Second, st.Lock.Lease, float64(2*time.Second))
	assert.Equal(t, int64(1700000000000001), st.Lock.Token)
	assert.Equal(t, []inspect.Waiter{{Owner: "u9:1"}, {Owner: "u9:2"}}, st.Lock.Queued)
	require.NotNil(t, st.FairLock)
	assert.Equal(t, int64(99), st.FairLock.Token)
	assert.Equal(t, []inspect.Waiter{{Owner: "u4:1"}, {Owner: "u5:1"}}, st.FairLock.Waiters)
	rw := st.RWLock
	require.NotNil(t, rw)
	require.Len(t, rw.Readers, 1, "the reader past its deadline is left out")
	assert.Equal(t, "u6:1", rw.Readers[0].Owner)
	assert.Equal(t, 2, rw.Readers[0].Count)
	assert.InDelta(t, 15*time.Second, rw.Readers[0].Lease, float64(2*time.Second))
	require.NotNil(t, rw.Writer)
	assert.Equal(t, "u7:1", rw.Writer.Owner)
	assert.Equal(t, int64(1700000000000002), rw.Token)
	require.Len(t, rw.WritersWaiting, 1)
	assert.Equal(t, "u8:1", rw.WritersWaiting[0].Owner)
	assert.Equal(t, now+8000, rw.WritersWaiting[0].Deadline.UnixMilli())
	st, err = c.Inspect(ctx, "lapsed")
	require.NoError(t, err)
	require.NotNil(t, st.RWLock)
	assert.Empty(t, st.RWLock.WritersWaiting, "the writers whose claim lapsed are left out")

	// A tail alone (a lock that ended) is no lock.
	require.NoError(t, rdb.HSet(ctx, "relock:{ended}:last", "~t", "3").Err())
	st, err = c.Inspect(ctx, "ended")
	require.NoError(t, err)
	assert.False(t, st.Exists())
}

func TestInspectChannels(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	const name = "inspect/{ch}"
	ch, err := c.Channels(name)
	require.NoError(t, err)
	ps := b.rdb.Subscribe(ctx, ch.Lock, ch.RWRead)
	defer ps.Close()
	for range 2 {
		_, err := ps.Receive(ctx)
		require.NoError(t, err)
	}
	pps := b.rdb.PSubscribe(ctx, ch.FairHandOverPrefix+"*", ch.LockHandOverPrefix+"*", ch.RWHandOverPrefix+"*")
	defer pps.Close()
	for range 3 {
		_, err = pps.Receive(ctx)
		require.NoError(t, err)
	}

	expect := func(ps *redis.PubSub, channel string) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		msg, err := ps.ReceiveMessage(rctx)
		require.NoError(t, err)
		assert.Equal(t, channel, msg.Channel)
	}

	// A Lock's release publishes only when someone waits: it hands the
	// lock over on the waiting Client's channel.
	hctx, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)
	waiting := b.newClient(t)
	handed := make(chan error, 1)
	go func() {
		wctx, err := waiting.Lock(name).Lock(ctx)
		if err == nil {
			err = waiting.Lock(name).Unlock(wctx)
		}
		handed <- err
	}()
	require.Eventually(t, func() bool {
		n, err := b.rdb.PubSubNumSub(ctx, ch.LockHandOverPrefix+waiting.ID()).Result()
		return err == nil && n[ch.LockHandOverPrefix+waiting.ID()] == 1
	}, 5*time.Second, time.Millisecond)
	settle(t, b)
	require.NoError(t, c.Lock(name).Unlock(hctx))
	expect(pps, ch.LockHandOverPrefix+waiting.ID())
	require.NoError(t, <-handed)

	// An RWLock's write unlock hands the write hold over on the waiting
	// writer's Client's channel; the end of that hold tells the waiting
	// readers, on the readers' channel. A write unlock nobody waits for
	// publishes nothing.
	wctx, err := c.RWLock(name).WriteLock().Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, c.RWLock(name).WriteLock().Unlock(wctx))
	wctx, err = c.RWLock(name).WriteLock().Lock(ctx)
	require.NoError(t, err)
	writer, reader := b.newClient(t), b.newClient(t)
	rwDone := make(chan error, 2)
	go func() {
		wctx, err := writer.RWLock(name).WriteLock().Lock(ctx)
		if err == nil {
			err = writer.RWLock(name).WriteLock().Unlock(wctx)
		}
		rwDone <- err
	}()
	require.Eventually(t, func() bool {
		n, err := b.rdb.PubSubNumSub(ctx, ch.RWHandOverPrefix+writer.ID()).Result()
		return err == nil && n[ch.RWHandOverPrefix+writer.ID()] == 1
	}, 5*time.Second, time.Millisecond)
	go func() {
		rctx, err := reader.RWLock(name).ReadLock().Lock(ctx)
		if err == nil {
			err = reader.RWLock(name).ReadLock().Unlock(rctx)
		}
		rwDone <- err
	}()
	require.Eventually(t, func() bool {
		n, err := b.rdb.PubSubNumSub(ctx, ch.RWRead).Result()
		return err == nil && n[ch.RWRead] == 2 // the reader's and ps
	}, 5*time.Second, time.Millisecond)
	settle(t, b)
	require.NoError(t, c.RWLock(name).WriteLock().Unlock(wctx))
	expect(pps, ch.RWHandOverPrefix+writer.ID())
	expect(ps, ch.RWRead)
	require.NoError(t, <-rwDone)
	require.NoError(t, <-rwDone)

	fctx, err := c.FairLock(name).Lock(ctx)
	require.NoError(t, err)
	other := b.newClient(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		octx, err := other.FairLock(name).Lock(ctx)
		if assert.NoError(t, err) {
			assert.NoError(t, other.FairLock(name).Unlock(octx))
		}
	}()
	require.Eventually(t, func() bool {
		st, err := c.Inspect(ctx, name)
		return err == nil && st.FairLock != nil && len(st.FairLock.Waiters) == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.FairLock(name).Unlock(fctx))
	expect(pps, ch.FairHandOverPrefix+other.ID())
	<-done
}

// Inspect lists a Lock's queued waiters in the order its releases hand the
// lock over, and drops one as soon as it gives up.
func TestInspectLockQueue(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t)
	const name = "inspect/queue"
	hctx, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)
	other := b.newClient(t)
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	gotFirst := make(chan error, 1)
	go func() { _, err := other.Lock(name).Lock(first); gotFirst <- err }()
	require.Eventually(t, func() bool {
		st, err := c.Inspect(ctx, name)
		return err == nil && st.Lock != nil && len(st.Lock.Queued) == 1
	}, 5*time.Second, time.Millisecond)
	second := lockAsync(other.Lock(name))
	var st *inspect.State
	require.Eventually(t, func() bool {
		st, err = c.Inspect(ctx, name)
		return err == nil && st.Lock != nil && len(st.Lock.Queued) == 2
	}, 5*time.Second, time.Millisecond)
	assert.NotEqual(t, st.Lock.Queued[0].Owner, st.Lock.Queued[1].Owner)
	assert.True(t, strings.HasPrefix(st.Lock.Queued[0].Owner, other.ID()+":"), st.Lock.Queued[0].Owner)
	secondOwner := st.Lock.Queued[1].Owner

	cancelFirst()
	require.ErrorIs(t, <-gotFirst, relock.ErrNotObtained)
	st, err = c.Inspect(ctx, name)
	require.NoError(t, err)
	require.Len(t, st.Lock.Queued, 1, "the waiter that gave up left the queue")
	assert.Equal(t, secondOwner, st.Lock.Queued[0].Owner)

	require.NoError(t, c.Lock(name).Unlock(hctx))
	wctx := mustGet(t, second, 2*time.Second)
	st, err = c.Inspect(ctx, name)
	require.NoError(t, err)
	require.NotNil(t, st.Lock)
	assert.Empty(t, st.Lock.Queued)
	assert.Equal(t, secondOwner, st.Lock.Holders[0].Owner, "handed over to the waiter that stayed")
	require.NoError(t, other.Lock(name).Unlock(wctx))
}
