package relock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Helpers for the Redis layout of exclusive holds (Lock, FairLock, the
// masters of a RedLock, the parts of a MultiLock): a hash with one field per
// owner (its hold count) and the meta fields ~g (generation), ~o (last op)
// and ~t (fencing token).

// defaultLatch is the default unlock latch: how long tails and latches
// outlive a released hold.
const defaultLatch = 30 * time.Second

// exclusiveHold is an exclusive lock's hash, split into owners and meta
// fields.
type exclusiveHold struct {
	owners map[string]string // owner field -> hold count
	gen    string            // ~g: op id of the acquire that started the hold
	op     string            // ~o: op id of the last request applied
	token  int64             // ~t: fencing token (0 when absent)
	hasTok bool              // ~t present
}

// readHold reads key and splits it; it fails t on a meta field it does not
// know.
func readHold(t testing.TB, rdb redis.UniversalClient, key string) exclusiveHold {
	t.Helper()
	h := exclusiveHold{owners: map[string]string{}}
	for k, v := range hgetall(t, rdb, key) {
		switch k {
		case "~g":
			h.gen = v
		case "~o":
			h.op = v
		case "~t":
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, "~t of %s is %q, not an integer", key, v)
			h.token, h.hasTok = n, true
		case "~q", "~m", "~l", "~s":
			// The lease granted, Lock's queue of waiters, its MultiLock
			// mark (queue_common.lua) and the tail's latch slot that a
			// fenced hold carries (acquire_common.lua, grant_new).
		default:
			if strings.HasPrefix(k, "~#") || strings.HasPrefix(k, "~@") {
				continue // a Lock's queue entries (queue_common.lua)
			}
			require.False(t, strings.HasPrefix(k, "~"), "unknown meta field %q in %s", k, key)
			h.owners[k] = v
		}
	}
	if h.op == "" {
		h.op = h.gen // a Lock's hold that applied no op after its acquire (last_op, acquire_common.lua)
	}
	return h
}

// assertHeldBy asserts that key is held by owner alone, count times, with
// every meta field of a live hold, and returns the hold.
func assertHeldBy(t testing.TB, rdb redis.UniversalClient, key, owner string, count int, msgAndArgs ...any) exclusiveHold {
	t.Helper()
	h := readHold(t, rdb, key)
	assert.Equal(t, map[string]string{owner: countStr(count)}, h.owners, msgAndArgs...)
	assert.NotEmpty(t, h.gen, "generation (~g) of %s", key)
	assert.NotEmpty(t, h.op, "last op (~o) of %s", key)
	assert.True(t, h.hasTok, "token (~t) of %s", key)
	return h
}

// assertClockToken asserts that tok is a time-based token handed out
// between from and to (by a Redis on this host): the server's clock in µs,
// with a second of slack. A token raised above the clock (last + 1) is not
// for this helper.
func assertClockToken(t testing.TB, tok int64, from, to time.Time, msgAndArgs ...any) {
	t.Helper()
	assert.GreaterOrEqual(t, tok, from.Add(-time.Second).UnixMicro(), msgAndArgs...)
	assert.LessOrEqual(t, tok, to.Add(time.Second).UnixMicro(), msgAndArgs...)
}

// heldKeys lists the keys of rdb that mean "held" (or waiting): every key
// but tails and latches. It asserts that those carry a TTL of at most
// latch, so that they never outlive a released lock by more than that.
func heldKeys(t testing.TB, rdb redis.UniversalClient, latch time.Duration) []string {
	t.Helper()
	var out []string
	for _, k := range allKeys(t, rdb) {
		if !leftover(t, rdb, k) {
			out = append(out, k)
			continue
		}
		d, err := rdb.PTTL(context.Background(), k).Result()
		require.NoError(t, err)
		if d == -2 {
			continue // expired since KEYS
		}
		assert.Positive(t, d, "%s must expire", k)
		assert.LessOrEqual(t, d, latch, "%s lives longer than the unlock latch", k)
	}
	return out
}

// tailOf returns the token kept in the tail key (0 when there is none) and
// asserts that the tail expires within latch.
func tailOf(t testing.TB, rdb redis.UniversalClient, key string, latch time.Duration) int64 {
	t.Helper()
	n, err := rdb.HGet(context.Background(), key, "~t").Int64()
	if err == redis.Nil {
		return 0
	}
	require.NoError(t, err)
	d := pttl(t, rdb, key)
	assert.Positive(t, d, "%s must expire", key)
	assert.LessOrEqual(t, d, latch, "%s lives longer than the unlock latch", key)
	return n
}

// lockQueueLen is how many waiters queue in the Lock hash key: the count in
// its ~q ("<head> <last> <count>", see queue_common.lua), 0 for none.
func lockQueueLen(t testing.TB, rdb redis.UniversalClient, key string) int {
	t.Helper()
	q, err := rdb.HGet(context.Background(), key, "~q").Result()
	if err == redis.Nil {
		return 0
	}
	require.NoError(t, err)
	f := strings.Fields(q)
	require.Len(t, f, 3, "~q of %s is %q", key, q)
	n, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	return n
}
