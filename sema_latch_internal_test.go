package relock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// semaLatchBytesBudget is what a Semaphore's release latch may cost Redis
// per release it remembers (MEMORY USAGE of the latch key, its own overhead
// included).
const semaLatchBytesBudget = 40

// semaCycles acquires and releases one permit of a Semaphore through its
// scripts, without the wait loop, to fill its latch fast.
type semaCycles struct {
	t   *testing.T
	c   *Client
	s   *Semaphore
	rdb *redis.Client
}

func newSemaCycles(t *testing.T, latch time.Duration) semaCycles {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := New(rdb, WithUnlockLatch(latch))
	t.Cleanup(func() { _ = c.Close() })
	return semaCycles{t: t, c: c, s: c.Semaphore("replay", 4), rdb: rdb}
}

// cycle takes a permit and releases it; it returns the release.
func (sc semaCycles) cycle() releaseReq {
	ctx := context.Background()
	gen := sc.c.newOp()
	res, err := sc.c.eval(ctx, "acquire", semaAcquireCall(sc.s, acquireReq{owner: "o", op: gen, lease: time.Minute}, 1, 4)).Int64Slice()
	require.NoError(sc.t, err)
	require.Equal(sc.t, int64(1), res[0])
	r := releaseReq{op: sc.c.newOp(), gen: gen}
	require.Equal(sc.t, int64(1), sc.release(r))
	return r
}

// release runs release r: 1 released (or a replay the latch remembers),
// -1 lost.
func (sc semaCycles) release(r releaseReq) int64 {
	n, err := sc.c.eval(context.Background(), "release", semaReleaseCall(sc.s, r)).Int64()
	require.NoError(sc.t, err)
	return n
}

// remembered is how many releases the latch key holds (8 bytes each), and
// its MEMORY USAGE.
func (sc semaCycles) remembered() (releases int, bytes int64) {
	ctx := context.Background()
	f, err := sc.rdb.HGetAll(ctx, sc.s.latch).Result()
	require.NoError(sc.t, err)
	for _, v := range f {
		require.Zero(sc.t, len(v)%8, "a slot is whole fingerprints")
		releases += len(v) / 8
	}
	bytes, err = sc.rdb.MemoryUsage(ctx, sc.s.latch, 0).Result()
	require.NoError(sc.t, err)
	return releases, bytes
}

// A Semaphore's release resent by go-redis answers "released" as long as
// the unlock latch lasts, however many releases came in between (a count
// of slots would forget it after 64), and never gives the permits back
// twice; the latch forgets the releases older than the latch while
// releases go on, so that it stays bounded by time.
func TestSemaphoreReleaseReplayBoundedByTime(t *testing.T) {
	many := newSemaCycles(t, 30*time.Second)
	first := many.cycle()
	for range 5000 {
		many.cycle()
	}
	assert.Equal(t, int64(1), many.release(first), "a replay after 5,000 releases is recognised")
	st, err := many.s.State(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.Used, "the replay gave nothing back twice")
	assert.Equal(t, int64(-1), many.release(releaseReq{op: many.c.newOp(), gen: first.gen}), "a new release of a gone hold is not")

	// Releases go on past the latch: the first is forgotten, the latch
	// holds the releases of one latch lifetime and a slot at most.
	const latch = 2 * time.Second
	sc := newSemaCycles(t, latch)
	first = sc.cycle()
	var times []time.Time
	for end := time.Now().Add(latch + 500*time.Millisecond); time.Now().Before(end); {
		sc.cycle()
		times = append(times, time.Now())
	}
	assert.Equal(t, int64(-1), sc.release(first), "a release older than the latch is forgotten")
	recent := sc.cycle()
	assert.Equal(t, int64(1), sc.release(recent))
	n, _ := sc.remembered()
	since := time.Now().Add(-latch - 2*latch/semaLatchSlots - 50*time.Millisecond)
	younger := 1
	for _, at := range times {
		if at.After(since) {
			younger++
		}
	}
	t.Logf("latch: %d releases remembered, %d released in its lifetime and two slots", n, younger)
	assert.LessOrEqual(t, n, younger, "the latch forgets what its lifetime no longer covers")
}

// semaLatchSlots is TIMESET_SLOTS of timeset_common.lua.
const semaLatchSlots = 32

// A release replayed just before the latch's age limit is recognised, one
// replayed a slot after it is not, and the latch key lives while it must.
func TestSemaphoreReleaseReplayNearTheLatchLimit(t *testing.T) {
	const latch = 1600 * time.Millisecond // slots of 50 ms
	sc := newSemaCycles(t, latch)
	early := sc.cycle()
	released := time.Now()
	late := sc.cycle()
	time.Sleep(time.Until(released.Add(latch - 100*time.Millisecond)))
	assert.Equal(t, int64(1), sc.release(early), "a replay 100 ms before the latch's end is recognised")
	time.Sleep(time.Until(released.Add(latch + latch/semaLatchSlots + 100*time.Millisecond)))
	assert.Equal(t, int64(-1), sc.release(late), "a replay a slot after the latch's end is not")
	assert.Zero(t, sc.rdb.Exists(context.Background(), sc.s.latch).Val(), "the latch key is gone with its last release")
}

// A Semaphore's latch costs Redis at most semaLatchBytesBudget bytes per
// release it remembers, on a real Redis, for a burst (one slot holds
// thousands) and for releases spread over the whole lifetime (about 100
// per second, a slot holding a few).
func TestSemaphoreLatchMemoryPerRelease(t *testing.T) {
	t.Run("burst", func(t *testing.T) {
		sc := newSemaCycles(t, 30*time.Second)
		for range 10000 {
			sc.cycle()
		}
		n, bytes := sc.remembered()
		require.Equal(t, 10000, n, "every release of the lifetime is remembered")
		per := float64(bytes) / float64(n)
		t.Logf("MEMORY USAGE of the latch: %d B for %d releases, %.1f B each", bytes, n, per)
		assert.LessOrEqual(t, per, float64(semaLatchBytesBudget), "bytes per release remembered")
	})
	t.Run("spread", func(t *testing.T) {
		const latch = 3200 * time.Millisecond // slots of 100 ms
		sc := newSemaCycles(t, latch)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for end := time.Now().Add(latch + 200*time.Millisecond); time.Now().Before(end); <-tick.C {
			sc.cycle()
		}
		n, bytes := sc.remembered()
		require.Greater(t, n, 100)
		per := float64(bytes) / float64(n)
		t.Logf("MEMORY USAGE of the latch: %d B for %d releases, %.1f B each", bytes, n, per)
		assert.LessOrEqual(t, per, float64(semaLatchBytesBudget), "bytes per release remembered")
	})
}
