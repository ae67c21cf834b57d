package relock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// latchKind drives one exclusive lock type's scripts directly, so that a
// release can be sent again, as go-redis or the background retry resends it,
// after other holds of the lock have come and gone.
type latchKind struct {
	name    string
	acquire func(c *Client, owner, op string) scriptCall
	release func(c *Client, owner, op, gen string) scriptCall
}

// latchCycle acquires kind k's lock for owner and releases it finally, with
// op ids from op, and returns the hold's generation and the release's op.
func latchCycle(t *testing.T, c *Client, k latchKind, owner string, op func() string) (gen, rel string) {
	t.Helper()
	ctx := context.Background()
	gen, rel = op(), op()
	v, err := k.acquire(c, owner, gen).run(ctx, c.rdb).Int64Slice()
	require.NoError(t, err)
	require.Equal(t, int64(1), v[0], "acquired")
	n, err := k.release(c, owner, rel, gen).run(ctx, c.rdb).Int64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "released")
	return gen, rel
}

func latchKinds(c *Client) []latchKind {
	lk := c.Lock("latched").keys
	fk := c.FairLock("latched").keys
	rk := c.RWLock("latched").keys
	lease := 10 * time.Second
	return []latchKind{
		{"Lock",
			func(c *Client, owner, op string) scriptCall {
				return lockAcquireCall(c, lk, owner, acquireReq{owner: owner, op: op, lease: lease}, false)
			},
			func(c *Client, owner, op, gen string) scriptCall {
				return lockReleaseCall(c, lk, owner, releaseReq{owner: owner, op: op, gen: gen, final: true})
			}},
		{"FairLock",
			func(c *Client, owner, op string) scriptCall {
				return fairAcquireCall(c, fk, acquireReq{owner: owner, op: op, lease: lease})
			},
			func(c *Client, owner, op, gen string) scriptCall {
				return fairReleaseCall(c, fk, releaseReq{owner: owner, op: op, gen: gen, final: true})
			}},
		{"RWLock",
			func(c *Client, owner, op string) scriptCall {
				return rwWriteAcquireCall(c, rk, acquireReq{owner: owner, op: op, lease: lease}, true)
			},
			func(c *Client, owner, op, gen string) scriptCall {
				return rwReleaseCall(c, rk, "w", releaseReq{owner: owner, op: op, gen: gen, final: true})
			}},
	}
}

// A final release that is sent again after its reply was lost reports
// success (1), also when other holds of the same lock were taken and
// released in between — up to the latch's LATCH_SLOTS (64) later final
// releases; one sent again after more than that reports the hold lost
// (-1), as one sent after the old latch key's expiry did. A release whose
// generation was never released by it reports lost.
func TestReplayedFinalReleaseUnderTheTailLatch(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, k := range latchKinds(c) {
		t.Run(k.name, func(t *testing.T) {
			seq := 0
			op := func() string { seq++; return fmt.Sprintf("%s:op%d", c.id, seq) }
			cycle := func(owner string) (gen, rel string) { return latchCycle(t, c, k, owner, op) }
			gen, rel := cycle("first")
			for i := range 10 {
				cycle(fmt.Sprintf("other%d", i))
			}
			n, err := k.release(c, "first", rel, gen).run(ctx, c.rdb).Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n, "the replayed final release reports success after 10 other releases")

			n, err = k.release(c, "first", op(), gen).run(ctx, c.rdb).Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(-1), n, "another request for the same ended generation is not a replay")

			for i := range 64 {
				cycle(fmt.Sprintf("more%d", i))
			}
			n, err = k.release(c, "first", rel, gen).run(ctx, c.rdb).Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(-1), n, "forgotten after 64 later final releases (the stated bound)")
		})
	}
}

// The latch keeps the last final releases: an RWLock's exactly the last
// 64, a Lock's and a FairLock's (segments of 8 in the hash, four of them
// full, see latch_add in release_common.lua) at least the last 32 and at
// most 40. A release followed by that many others is recognised when sent
// again; one followed by the most is not.
func TestLatchKeepsTheLastFinalReleases(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	kept := map[string]int{"Lock": 31, "FairLock": 31, "RWLock": 63}
	most := map[string]int{"Lock": 40, "FairLock": 40, "RWLock": 64}
	for _, k := range latchKinds(c) {
		t.Run(k.name, func(t *testing.T) {
			seq := 0
			op := func() string { seq++; return fmt.Sprintf("%s:bound%d", c.id, seq) }
			cycle := func(owner string) (gen, rel string) { return latchCycle(t, c, k, owner, op) }
			replay := func(gen, rel string) int64 {
				n, err := k.release(c, "first", rel, gen).run(ctx, c.rdb).Int64()
				require.NoError(t, err)
				return n
			}
			for start := range 70 { // the release checked lands anywhere in the latch
				if start%9 != 0 {
					cycle(fmt.Sprintf("before%d", start))
					continue
				}
				gen, rel := cycle("first")
				for i := range kept[k.name] {
					cycle(fmt.Sprintf("other%d", i))
				}
				assert.Equal(t, int64(1), replay(gen, rel), "recognised after %d later final releases", kept[k.name])
				for i := kept[k.name]; i < most[k.name]; i++ {
					cycle(fmt.Sprintf("more%d", i))
				}
				assert.Equal(t, int64(-1), replay(gen, rel), "forgotten after %d", most[k.name])
			}
		})
	}
}

// A Lock's release recorded by the layout before segments, in its older
// half ~p (32 op ids after NULs, count in a one-byte ~n), is still
// recognised when it is replayed after an upgrade, and the next releases
// write the segments beside it.
func TestLatchReadsTheOlderHalfOfTheLayoutBefore(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	k := latchKinds(c)[0]
	hash := c.Lock("latched").keys.hash
	old := c.id + ":before-upgrade"
	require.NoError(t, c.rdb.HSet(ctx, hash, "~t", "1", "~p", "\x00"+old+"\x00", "~r", "\x00x:1\x00", "~n", "\x20").Err())
	seq := 0
	op := func() string { seq++; return fmt.Sprintf("%s:after%d", c.id, seq) }
	for range 3 {
		latchCycle(t, c, k, "other", op)
	}
	n, err := k.release(c, "first", old, c.id+":gone-gen").run(ctx, c.rdb).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the release recorded in the older layout's ~p is a replay")
	n, err = k.release(c, "first", c.id+":never", c.id+":gone-gen").run(ctx, c.rdb).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(-1), n, "a release nobody recorded is a lost hold")
}
