package relock_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// A Redis that refuses the Client's user — no password, a wrong one, an ACL
// user without a command the scripts call — or cannot be reached fails
// every acquire with ErrNotObtained and ErrUnavailable, and every other call
// with ErrUnavailable, in words a newcomer understands; a dial error keeps
// the dial error (so does a call cut short by its deadline while go-redis
// dials again: TestCutShortOnARefusedPortSaysNothingWasSent).
func TestRedisRefusalsAreUnavailableAndSaySo(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	require.NoError(t, admin.ConfigSet(ctx, "requirepass", "s3cret").Err())
	setUser(t, admin, "nohset", []string{"on", ">pw", "~*", "&*", "+@all", "-hset"})
	port, err := redistest.FreePort()
	require.NoError(t, err)
	cases := []struct {
		name string
		rdb  *redis.Client
		says string
	}{
		{"NoPassword", srv.Client(), "requires a password"},
		{"WrongPassword", srv.Client(func(o *redis.Options) { o.Password = "nope" }), "refused the username or password"},
		{"NoHSET", srv.Client(func(o *redis.Options) { o.Username, o.Password = "nohset", "pw" }), "ACL user may not run a command"},
		{"RefusedPort", redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)}), "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := relock.New(tc.rdb, relock.WithLogger(quietLogger()))
			t.Cleanup(func() { _ = c.Close(); _ = tc.rdb.Close() })
			acquires := map[string]func(context.Context) error{
				"Lock.TryLock":         func(ctx context.Context) error { _, err := c.Lock("x").TryLock(ctx, 0, 0); return err },
				"FairLock.Lock":        func(ctx context.Context) error { _, err := c.FairLock("x").Lock(ctx); return err },
				"Semaphore.TryAcquire": func(ctx context.Context) error { _, err := c.Semaphore("s", 2).TryAcquire(ctx, 1, 0, 0); return err },
			}
			for name, call := range acquires {
				err := call(context.Background()) // no deadline: the call's own error, not a bound's

				assert.ErrorIs(t, err, relock.ErrNotObtained, "%s: %v", name, err)
				assert.ErrorIs(t, err, relock.ErrUnavailable, "%s: %v", name, err)
				assert.ErrorContains(t, err, tc.says, name)
			}
			if tc.name == "NoHSET" {
				return // the queries need no HSET
			}
			_, err := c.Lock("x").IsLocked(context.Background())
			assert.ErrorIs(t, err, relock.ErrUnavailable, "IsLocked: %v", err)
			assert.ErrorContains(t, err, tc.says, "IsLocked")
		})
	}
}
