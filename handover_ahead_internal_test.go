package relock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// A Lock's final release reads the queue entry its Client expects at the
// head (releaseReq.ahead: the position after the one the hold was handed
// from) with the hold's fields, so that a hand-over to that waiter reads
// the queue no further: one HMGET, where the walk from ~q's head takes two.
// The position is a guess, checked against ~q: a guess that is wrong, or
// that names a hole, never changes who is granted, only what is read.
func TestReleaseReadsTheExpectedHeadWithTheHold(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := c.Lock("ahead")
	s := lockScheme{l}

	// Waiters of three other "Clients", whose grant channels are listened
	// to here, so that PUBLISH counts a receiver for each.
	listen := func(client string) {
		ps := rdb.Subscribe(ctx, l.keys.hash+":w:"+client)
		t.Cleanup(func() { _ = ps.Close() })
		_, err := ps.Receive(ctx)
		require.NoError(t, err)
	}
	for _, w := range []string{"wa", "wb", "wc", "wd"} {
		listen(w)
	}
	acquire := func(op string) attempt {
		t.Helper()
		a, err := s.acquire(ctx, acquireReq{owner: op + "-owner", op: op, lease: time.Minute, waiter: true})
		require.NoError(t, err)
		return a
	}
	hmgets := func() int64 {
		m, err := redistest.CommandCalls(ctx, rdb)
		require.NoError(t, err)
		return m["hmget"]
	}
	release := func(holder string, ahead int64) (granted string, reads int64) {
		t.Helper()
		before := hmgets()
		out, err := s.release(ctx, releaseReq{owner: holder + "-owner", op: c.newOp(), gen: holder, final: true, ahead: ahead})
		require.NoError(t, err)
		require.Equal(t, released, out)
		reads = hmgets() - before
		g, err := rdb.HGet(ctx, l.keys.hash, "~g").Result()
		require.NoError(t, err)
		return g, reads
	}

	require.Equal(t, acquired, acquire("h:1").outcome)
	var at []int64
	for _, op := range []string{"wa:1", "wb:1", "wc:1", "wd:1"} {
		a := acquire(op)
		require.Equal(t, busy, a.outcome)
		assert.Equal(t, placeAnew, a.place)
		at = append(at, a.at)
	}
	require.Equal(t, []int64{1, 2, 3, 4}, at, "each busy attempt replies its position")
	again := acquire("wb:1")
	assert.Equal(t, placeKept, again.place)
	assert.Equal(t, int64(2), again.at, "a waiter keeps its position across its attempts")

	// A wrong guess (a later waiter's position) grants the head all the same.
	g, reads := release("h:1", 3)
	assert.Equal(t, "wa:1", g, "the head is granted whatever the guess")
	assert.Equal(t, int64(2), reads, "a wrong guess: the queue is read from its head")

	// The right guess: the entry after wa's.
	g, reads = release("wa:1", 2)
	assert.Equal(t, "wb:1", g)
	assert.Equal(t, int64(1), reads, "the right guess: the hold's HMGET read the entry too")

	// A guess that names a hole: wc left; the walk goes on to wd.
	s.leave(ctx, "wc:1-owner", "wc:1", time.Minute)
	g, reads = release("wb:1", 3)
	assert.Equal(t, "wd:1", g, "a hole at the guess is stepped over")
	assert.Equal(t, int64(2), reads)

	// The right guess names a waiter whose Client no longer listens: the
	// walk goes on from it to the next. (The queue was empty: positions
	// start again at 1.)
	require.Equal(t, int64(1), acquire("wx:1").at)
	require.Equal(t, int64(2), acquire("wa:2").at)
	g, reads = release("wd:1", 1)
	assert.Equal(t, "wa:2", g, "a waiter nobody listens for is skipped")
	assert.Equal(t, int64(2), reads)

	// The last hold, with nobody queued, frees the lock whatever the guess.
	out, err := s.release(ctx, releaseReq{owner: "wa:2-owner", op: c.newOp(), gen: "wa:2", final: true, ahead: 3})
	require.NoError(t, err)
	assert.Equal(t, released, out)
	fields, err := rdb.HKeys(ctx, l.keys.hash).Result()
	require.NoError(t, err)
	for _, f := range fields {
		assert.NotContains(t, []string{"~g", "~q", "~l"}, f, "the lock is free, its queue gone")
		assert.NotRegexp(t, `^~[#@]`, f, "no queue entry is left")
	}
}
