package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// The watchdog's timer keeps running while nothing is held (so that Lock
// never has to wake it): idle ticks must send nothing, and a hold taken after
// an idle spell must still be renewed before its lease runs out.
func TestWatchdogIdleTicksSendNothingAndLaterHoldsAreRenewed(t *testing.T) {
	b := newReal(t)
	const lease = 300 * time.Millisecond
	c := b.newClient(t, relock.WithWatchdogLease(lease))
	l := c.Lock("idle")

	ctx, err := l.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	ticks0, trips0, _ := c.WatchdogStats()
	require.Eventually(t, func() bool {
		ticks, _, _ := c.WatchdogStats()
		return ticks >= ticks0+2
	}, 5*lease, lease/30, "the watchdog ticks while idle")
	_, trips, _ := c.WatchdogStats()
	assert.Equal(t, trips0, trips, "an idle tick sends nothing to Redis")

	ctx, err = l.Lock(context.Background())
	require.NoError(t, err)
	// Twice the lease: without renewals the key would be gone.
	time.Sleep(2 * lease)
	assert.NoError(t, ctx.Err(), "the hold is still valid")
	assert.Equal(t, map[string]string{ownerField(t, c, ctx): "1"}, owners(t, b.rdb, l.Key()))
	assert.Greater(t, pttl(t, b.rdb, l.Key()), lease/3, "renewed within the last lease/3")
	_, trips, _ = c.WatchdogStats()
	assert.Greater(t, trips, trips0, "renewals went out")
	require.NoError(t, l.Unlock(ctx))
}
