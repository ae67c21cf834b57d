package relock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exclusiveQueue is a Lock or a FairLock driven by its scripts: an acquire
// that queues, a final release and an abandon, each by op id.
type exclusiveQueue struct {
	name    string
	hash    string
	acquire func(owner, op string) []int64
	release func(owner, gen string) int64
	abandon func(owner, op string)
	queued  func() int64 // how many entries the queue keeps
}

func exclusiveQueues(t *testing.T, rdb redis.UniversalClient, c *Client) []exclusiveQueue {
	ctx := context.Background()
	lease := 10 * time.Second
	run := func(call scriptCall) *redis.Cmd { return call.run(ctx, rdb) }
	ints := func(cmd *redis.Cmd) []int64 {
		v, err := cmd.Int64Slice()
		require.NoError(t, err)
		return v
	}
	one := func(cmd *redis.Cmd) int64 {
		v, err := cmd.Int64()
		require.NoError(t, err)
		return v
	}
	lk, fk := c.Lock("queue-walk").keys, c.FairLock("queue-walk").keys
	return []exclusiveQueue{{
		name: "Lock", hash: lk.hash,
		acquire: func(owner, op string) []int64 {
			return ints(run(lockAcquireCall(c, lk, owner, acquireReq{op: op, lease: lease}, true)))
		},
		release: func(owner, gen string) int64 {
			return one(run(lockReleaseCall(c, lk, owner, releaseReq{op: c.newOp(), gen: gen, final: true})))
		},
		abandon: func(owner, op string) {
			require.NoError(t, run(abandonCall(c, lockAbandonScript, lk.releaseKeys, owner, op, lease)).Err())
		},
		queued: func() int64 {
			var n int64
			if q := rdb.HGet(ctx, lk.hash, "~q").Val(); q != "" {
				_, err := fmt.Sscanf(q, "%d %d %d", new(int64), new(int64), &n)
				require.NoError(t, err)
			}
			return n
		},
	}, {
		name: "FairLock", hash: fk.hash,
		acquire: func(owner, op string) []int64 {
			return ints(run(fairAcquireCall(c, fk, acquireReq{owner: owner, op: op, lease: lease, waiter: true})))
		},
		release: func(owner, gen string) int64 {
			return one(run(fairReleaseCall(c, fk, releaseReq{owner: owner, op: c.newOp(), gen: gen, final: true})))
		},
		abandon: func(owner, op string) {
			require.NoError(t, run(abandonCall(c, fairAbandonScript, fk.releaseKeys, owner, op, lease)).Err())
		},
		queued: func() int64 { return rdb.ZCard(ctx, fk.queue).Val() },
	}}
}

// A release walks the queue from its head past waiters that gave up (holes,
// for a Lock) and waiters whose Client no longer listens, however many
// batches of reads that takes, to the first live waiter, and hands it the
// lock; every entry it walked past is gone, the rest keep their places.
func TestHandOverWalksPastHolesAndDeadWaiters(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	for _, q := range exclusiveQueues(t, rdb, c) {
		t.Run(q.name, func(t *testing.T) {
			holder := c.newOp()
			require.Equal(t, int64(1), q.acquire("h:1", holder)[0])
			// Queued in order: 10 that give up, in a scrambled order, 10 of
			// a Client that is gone, then two of this Client's.
			var left, dead []string
			for i := range 10 {
				left = append(left, c.newOp())
				require.Equal(t, []int64{0, 0, int64(placeAnew)}, zeroPTTL(q.acquire(fmt.Sprintf("left:%d", i), left[i])))
			}
			for i := range 10 {
				dead = append(dead, fmt.Sprintf("gone-client:%d", i))
				q.acquire(fmt.Sprintf("dead:%d", i), dead[i])
			}
			live, next := c.newOp(), c.newOp()
			q.acquire("live:1", live)
			require.Equal(t, []int64{0, 0, int64(placeKept)}, zeroPTTL(q.acquire("live:1", live)), "a waiter keeps its place")
			q.acquire("live:2", next)
			for _, i := range []int{3, 0, 9, 5, 1, 7, 2, 8, 6, 4} {
				q.abandon(fmt.Sprintf("left:%d", i), left[i])
			}
			require.Equal(t, int64(12), q.queued())

			sub := rdb.Subscribe(ctx, q.hash+":w:"+c.id)
			t.Cleanup(func() { _ = sub.Close() })
			_, err := sub.Receive(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), q.release("h:1", holder))
			assert.Equal(t, live, rdb.HGet(ctx, q.hash, "~g").Val(), "handed to the first live waiter")
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			msg, err := sub.ReceiveMessage(rctx)
			require.NoError(t, err)
			assert.Contains(t, msg.Payload, live+" ")
			assert.Equal(t, int64(1), q.queued(), "only the waiter behind it is left")

			require.Equal(t, int64(1), q.release("live:1", live))
			assert.Equal(t, next, rdb.HGet(ctx, q.hash, "~g").Val())
			assert.Equal(t, int64(0), q.queued())
			require.Equal(t, int64(1), q.release("live:2", next))
			// A free Lock's hash keeps its last token and latch (see
			// release_common.lua): its tail.
			for _, f := range rdb.HKeys(ctx, q.hash).Val() {
				assert.Contains(t, []string{"~t", "~r", "~n", "~p0", "~p1", "~p2", "~p3", "~f"}, f, "nothing is left of the lock but its tail")
			}
		})
	}
}

// zeroPTTL is a busy acquire's reply without the lease left, nor a Lock's
// position in its queue (handover_ahead_internal_test checks that).
func zeroPTTL(v []int64) []int64 {
	if len(v) >= 3 && v[0] == 0 {
		v[1] = 0
	}
	return v[:min(len(v), 3)]
}
