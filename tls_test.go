package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// The library over TLS (mutual: the server requires a client certificate),
// with certificates generated for the test: locking, waiting on pub/sub and
// watchdog renewals all go through the TLS connections.
func TestTLS(t *testing.T) {
	noLeaks(t)
	srv, _ := redistest.StartTLS(t)
	ctx := context.Background()

	// The port speaks TLS only: a plain connection gets nowhere.
	plain := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = plain.Close() })
	require.Error(t, plain.Ping(ctx).Err())

	eachKind(t, func(t *testing.T, k lockKind) {
		const lease = 600 * time.Millisecond
		holder := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = holder.Close() })
		waiter := relock.New(srv.Client(), relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = waiter.Close() })

		l := k.open(holder, "tls")
		hctx, err := l.Lock(ctx)
		require.NoError(t, err)
		got := lockAsync(k.open(waiter, "tls"))
		require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
		waitTicks(t, holder, 4) // renewals past the lease
		require.NoError(t, hctx.Err())
		assert.Equal(t, map[string]string{ownerField(t, holder, hctx): "1"}, k.state(t, srv.Client(), k.keyOf(holder, "tls")))
		mustNotGet(t, got)
		require.NoError(t, l.Unlock(hctx))
		wctx := mustGet(t, got, 5*time.Second)
		require.NoError(t, k.open(waiter, "tls").Unlock(wctx))
		assert.Empty(t, k.state(t, srv.Client(), k.keyOf(holder, "tls")))
	})
}
