package relock_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/inspect"
)

// A bad name fails every call with ErrInvalidName (an ErrInvalidArgument)
// and writes nothing; the default name is "<host>:<pid>".
func TestWithNameValidatesAndDefaults(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	for _, bad := range []string{"", "a b", "tab\there", "nul\x00", "é", strings.Repeat("x", 129)} {
		c := b.newClient(t, relock.WithName(bad))
		_, err := c.Lock("named").Lock(ctx)
		assert.ErrorIs(t, err, relock.ErrInvalidName, "%q", bad)
		assert.ErrorIs(t, err, relock.ErrInvalidArgument, "%q", bad)
	}
	assert.Empty(t, allKeys(t, b.rdb), "a bad name changed Redis")
	keys, err := b.rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "a bad name wrote a name record")

	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, host+":"+strconv.Itoa(os.Getpid()), relock.New(b.rdb).Name())
	assert.Equal(t, strings.Repeat("x", 128), relock.New(b.rdb, relock.WithName(strings.Repeat("x", 128))).Name())
}

// Inspect names each holder's and waiter's Client, read from the one record
// each Client keeps (with a TTL), not from the holds: the lock's hash holds
// no name.
func TestInspectNamesTheHoldersClients(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	holder := relock.New(b.newConn(t), relock.WithName("orders-worker-1"))
	t.Cleanup(func() { _ = holder.Close() })
	waiter := relock.New(b.newConn(t), relock.WithName("orders-worker-2"))
	t.Cleanup(func() { _ = waiter.Close() })
	inspector := b.newClient(t)
	// The waiter's Client holds something too, so it has written its record.
	other, err := waiter.Lock("other").Lock(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = waiter.Lock("other").Unlock(other) })

	h, err := holder.FairLock("named").Lock(ctx)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		w, err := waiter.FairLock("named").Lock(ctx)
		if err == nil {
			err = waiter.FairLock("named").Unlock(w)
		}
		done <- err
	}()
	var st *inspect.State
	require.Eventually(t, func() bool {
		s, err := inspector.Inspect(ctx, "named")
		st = s
		return err == nil && s.FairLock != nil && len(s.FairLock.Waiters) == 1 &&
			s.FairLock.Holders[0].Name != "" && s.FairLock.Waiters[0].Name != ""
	}, 5*time.Second, 5*time.Millisecond, "Inspect never named the Clients")
	assert.Equal(t, "orders-worker-1", st.FairLock.Holders[0].Name)
	assert.Equal(t, "orders-worker-2", st.FairLock.Waiters[0].Name)
	for f := range hgetall(t, b.rdb, holder.FairLock("named").Key()) {
		assert.NotContains(t, f, "orders-worker")
	}
	for _, v := range hgetall(t, b.rdb, holder.FairLock("named").Key()) {
		assert.NotContains(t, v, "orders-worker", "a hold carries no name")
	}
	rec := "relock:client:{" + holder.ID() + "}"
	name, err := b.rdb.Get(ctx, rec).Result()
	require.NoError(t, err)
	assert.Equal(t, "orders-worker-1", name)
	ttl := pttl(t, b.rdb, rec)
	assert.Greater(t, ttl, time.Duration(0))
	assert.LessOrEqual(t, ttl, 60*time.Second, "twice the watchdog lease")

	// A missing record shows the owner alone.
	require.NoError(t, b.rdb.Del(ctx, rec).Err())
	s, err := inspector.Inspect(ctx, "named")
	require.NoError(t, err)
	assert.Empty(t, s.FairLock.Holders[0].Name)
	assert.NotEmpty(t, s.FairLock.Holders[0].Owner)
	// The holder's own Client knows its name without the record.
	own, err := holder.Inspect(ctx, "named")
	require.NoError(t, err)
	assert.Equal(t, "orders-worker-1", own.FairLock.Holders[0].Name)
	assert.Equal(t, "orders-worker-2", own.FairLock.Waiters[0].Name, "another Client's, from its record")

	require.NoError(t, holder.FairLock("named").Unlock(h))
	require.NoError(t, <-done)
}
