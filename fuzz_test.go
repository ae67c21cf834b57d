package relock_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// FuzzLock throws arbitrary lock names, key prefixes and durations at a real
// Redis in cluster mode (one node holding every slot, so that the server
// itself rejects any script whose keys span slots). Whatever the input:
// nothing panics, bad input is ErrInvalidArgument and writes nothing, good
// input locks and unlocks with every key in one slot, and every error is
// relock's, never a bare script or CROSSSLOT error.
//
// The seeds in testdata/fuzz/FuzzLock run as part of go test; explore with
// go test -run '^$' -fuzz FuzzLock -fuzztime 1m .
func FuzzLock(f *testing.F) {
	cl := redistest.StartCluster(f, 1, 0)
	rdb := cl.Client()
	node := cl.Nodes[0].Client()
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

	f.Fuzz(func(t *testing.T, name, prefix string, leaseMs, waitMs, watchdogMs int64) {
		ctx := context.Background()
		require.NoError(t, node.FlushAll(ctx).Err())
		c := relock.New(rdb, relock.WithKeyPrefix(prefix), relock.WithWatchdogLease(ms(watchdogMs)))
		defer c.Close()
		l := c.Lock(name)

		// Bounded, so that a lock left behind shows up as an error, not a
		// hang; the lock is free, so nothing should wait at all.
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		hctx, err := l.TryLock(lctx, ms(waitMs), ms(leaseMs))
		checkErr(t, err)
		if err != nil && waitMs == 0 && shorterThanAReply(ms(cmp.Or(leaseMs, watchdogMs))) && expiredOnArrival(err) {
			// A lease over before its grant's reply came (-race, a busy
			// machine) is refused, the grant given back, and a TryLock that
			// does not wait fails: what relock documents, not bad input.
			require.Eventually(t, func() bool { return len(keysLeft(t, node)) == 0 }, time.Second, time.Millisecond,
				"the refused grant is given back")
			return
		}
		if err != nil {
			require.ErrorIs(t, err, relock.ErrInvalidArgument, "the lock is free: only bad input may fail")
			keys, kerr := node.Keys(ctx, "*").Result()
			require.NoError(t, kerr)
			require.Empty(t, keys, "bad input wrote to Redis")
			return
		}

		keys, err := node.Keys(ctx, "*").Result()
		require.NoError(t, err)
		keys = slices.DeleteFunc(keys, nameRecord) // the Client's, not the lock's
		if len(keys) == 0 {
			// Only a lease of a few ms may be over in Redis already, and the
			// holder is then told at once.
			select {
			case <-hctx.Done():
				require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
			case <-time.After(time.Second):
				t.Fatal("the hold's keys are gone but the holder was not told")
			}
		}
		slot := int64(-1)
		for _, k := range keys {
			require.True(t, strings.HasPrefix(k, prefix+":"), "key %q outside prefix %q", k, prefix)
			s, err := node.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, err)
			if slot >= 0 {
				require.Equal(t, slot, s, "keys of one lock in two slots: %q", keys)
			}
			slot = s
		}
		// A lease of a few ms may run out while this looks: read first, and
		// assert only when the hold was still live after the reads.
		tok, terr := l.Token(hctx)
		fields := hgetall(t, node, l.Key())
		if hctx.Err() == nil {
			require.NoError(t, terr)
			require.Positive(t, tok)
			require.Equal(t, "1", fields[ownerField(t, c, hctx)])
			require.Equal(t, strconv.FormatInt(tok, 10), fields["~t"])
		} else if terr != nil {
			require.ErrorIs(t, terr, relock.ErrNotHeld)
			require.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)
		}

		err = l.Unlock(hctx)
		checkErr(t, err)
		if err != nil {
			require.ErrorIs(t, err, relock.ErrLockLost, "only a lease that ran out may make Unlock fail")
			// The holder stops believing a margin before Redis lets go.
			require.Eventually(t, func() bool { return len(hgetall(t, node, l.Key())) == 0 }, time.Second, time.Millisecond)
			return
		}
		require.Empty(t, hgetall(t, node, l.Key()))
		requireOnlyExpiringLeftovers(t, node)
	})
}

// shorterThanAReply reports whether a lease of d may be over before its
// grant's reply comes, on a loaded machine under -race.
func shorterThanAReply(d time.Duration) bool { return d > 0 && d < 50*time.Millisecond }

// expiredOnArrival reports whether err is a Lock's that refused its grant,
// the reply having come after the lease.
func expiredOnArrival(err error) bool {
	return errors.Is(err, relock.ErrNotObtained) && strings.Contains(err.Error(), "after its lease had run out")
}

// checkErr fails on an error that is not relock's: every error must wrap one
// of the package's sentinels or carry the "relock: " prefix of a wrapped
// Redis error, and none may be a cross-slot error.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	require.NotContains(t, err.Error(), "CROSSSLOT")
	require.NotContains(t, err.Error(), "hash to the same slot")
	for _, s := range []error{relock.ErrInvalidArgument, relock.ErrNotObtained, relock.ErrNotHeld, relock.ErrLockLost, relock.ErrClientClosed, relock.ErrUnavailable} {
		if errors.Is(err, s) {
			return
		}
	}
	require.True(t, strings.HasPrefix(err.Error(), "relock: "), "unwrapped error: %v", err)
}
