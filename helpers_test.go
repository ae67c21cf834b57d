package relock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// backend is one Redis the behaviour tests run against: miniredis (fast,
// FastForward for TTLs) or a real redis-server started for the test.
type backend struct {
	name string
	mini *miniredis.Miniredis
	srv  *redistest.Server
	rdb  *redis.Client
}

func (b *backend) real() bool { return b.srv != nil }

// newClient returns a relock Client on the backend, closed when t ends.
func (b *backend) newClient(t testing.TB, opts ...relock.Option) *relock.Client {
	c := relock.New(b.rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newConn returns a second, independent go-redis client (another "process").
func (b *backend) newConn(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: b.addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (b *backend) addr() string {
	if b.mini != nil {
		return b.mini.Addr()
	}
	return b.srv.Addr()
}

// expire makes d pass for the server's TTLs: FastForward on miniredis; on a
// real server, waiting is the only way (callers then use short leases).
func (b *backend) expire(d time.Duration) {
	if b.mini != nil {
		b.mini.FastForward(d)
		return
	}
	time.Sleep(d)
}

func newMini(t testing.TB) *backend {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return &backend{name: "miniredis", mini: m, rdb: rdb}
}

func newReal(t testing.TB) *backend {
	srv := redistest.Start(t)
	return &backend{name: "redis", srv: srv, rdb: srv.Client()}
}

// eachBackend runs f as a subtest on miniredis and on a real redis-server.
func eachBackend(t *testing.T, f func(t *testing.T, b *backend)) {
	t.Run("miniredis", func(t *testing.T) { f(t, newMini(t)) })
	t.Run("redis", func(t *testing.T) { f(t, newReal(t)) })
}

func hgetall(t testing.TB, rdb redis.UniversalClient, key string) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), key).Result()
	require.NoError(t, err)
	return m
}

func pttl(t testing.TB, rdb redis.UniversalClient, key string) time.Duration {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	return d
}

// ownerField returns the hash field relock writes for the owner in ctx.
func ownerField(t testing.TB, c *relock.Client, ctx context.Context) string {
	t.Helper()
	id, ok := relock.OwnerOf(ctx)
	require.True(t, ok, "context carries no owner")
	return c.ID() + ":" + id
}

func countStr(n int) string { return strconv.Itoa(n) }

// keys lists every key in the backend's database.
func allKeys(t testing.TB, rdb redis.UniversalClient) []string {
	t.Helper()
	k, err := rdb.Keys(context.Background(), "*").Result()
	require.NoError(t, err)
	return k
}
