package relock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
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

// hgetall reads the hash at key. Of a Lock's (or SpinLock's) hash it leaves
// out the record that the hash keeps for the lock when it is free: the
// latch (~r, ~n and its full segments ~p0..~p3), the void marks (~x)
// and, without a hold (no ~g), the last token. So a free Lock reads as
// empty, as any other free lock does.
func hgetall(t testing.TB, rdb redis.UniversalClient, key string) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), key).Result()
	require.NoError(t, err)
	if !ownTail(key) {
		return m
	}
	// The latch, the generation last freed and the void marks a settled
	// acquire leaves (scripts/void_common.lua): the free lock's record,
	// with its token.
	for _, f := range []string{"~r", "~n", "~p0", "~p1", "~p2", "~p3", "~x", "~f"} {
		delete(m, f)
	}
	if m["~g"] == "" {
		delete(m, "~t")
	}
	return m
}

// ownTail reports whether key is the hash of a Lock (or SpinLock, or a
// MultiLock's or RedLock's part) or of a FairLock, which keeps its last
// token and release latch itself when free; other kinds keep them in a tail
// key, key+":last".
func ownTail(key string) bool {
	return strings.HasSuffix(key, "}") || strings.HasSuffix(key, "}:spin") || strings.HasSuffix(key, "}:fair")
}

// tailKey returns the key that keeps the last token and the release latch
// of the lock whose hash is key (see ownTail).
func tailKey(key string) string {
	if ownTail(key) {
		return key
	}
	return key + ":last"
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

// keys lists every key in the backend's database but the Clients' name
// records (relock:client:{<id>}), which belong to no lock: each lives
// twice the watchdog lease past its Client's last hold (names.go), which
// nameRecordsExpire checks.
func allKeys(t testing.TB, rdb redis.UniversalClient) []string {
	t.Helper()
	k, err := rdb.Keys(context.Background(), "*").Result()
	require.NoError(t, err)
	out := k[:0]
	for _, key := range k {
		if !nameRecord(key) {
			out = append(out, key)
		}
	}
	return out
}

// nameRecord reports whether k is a Client's name record.
func nameRecord(k string) bool { return strings.Contains(k, ":client:{") }

// holdMeta are the fields a Lock or FairLock hash keeps beside its owner's
// count: the hold's generation (op id of the acquire that started it) and
// the fencing token. The last op applied (~o) is there once an op after
// the acquire applied (a FairLock's from the start): a Lock's hold without
// it has applied none (see last_op in acquire_common.lua).
var holdMeta = []string{"~g", "~t"}

// owners returns the Lock or FairLock hash at key as owner → count, the meta
// fields left out. A held lock must have exactly one owner and every meta
// field, which it checks.
func owners(t testing.TB, rdb redis.UniversalClient, key string) map[string]string {
	t.Helper()
	return ownersOf(t, hgetall(t, rdb, key))
}

// ownersOf is owners for a hash already read.
func ownersOf(t testing.TB, hash map[string]string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for f, v := range hash {
		if !strings.HasPrefix(f, "~") {
			out[f] = v
		}
	}
	if len(hash) == 0 || (hash["~g"] == "" && len(out) == 0) {
		return out // free (a free Lock's hash keeps its token and latch)
	}
	assert.Len(t, out, 1, "an exclusive lock has one owner: %v", hash)
	for _, f := range holdMeta {
		assert.NotEmpty(t, hash[f], "field %s of a held lock: %v", f, hash)
	}
	tok, err := strconv.ParseInt(hash["~t"], 10, 64)
	assert.NoError(t, err, "~t is a number: %v", hash)
	assert.GreaterOrEqual(t, tok, int64(0), "~t: %v", hash)
	return out
}

// storedToken returns the fencing token the hash at key keeps (~t), 0 when
// there is none.
func storedToken(t testing.TB, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	v, err := rdb.HGet(context.Background(), key, "~t").Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	return n
}

// storedTail returns the token in the tail of the lock whose hash is key, 0
// when there is none.
func storedTail(t testing.TB, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	n, err := rdb.HGet(context.Background(), tailKey(key), "~t").Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	return n
}

// defaultUnlockLatch is how long a tail or a latch outlives a free lock
// unless WithUnlockLatch says otherwise.
const defaultUnlockLatch = 30 * time.Second

// leftover reports whether k is one of the keys that outlive a free lock by
// design: a Client's name record (relock:client:{id}, renewed with its
// watchdog, expiring two leases after), or, for the unlock latch's time
// only, a tail (the last token, so that
// the next one is above it, and the latch of the last final releases), or
// a free Lock's hash, which keeps the same record (see freeRecord).
func leftover(t testing.TB, rdb redis.UniversalClient, k string) bool {
	return strings.HasSuffix(k, ":last") || strings.HasPrefix(k, "relock:client:") || freeRecord(t, rdb, k)
}

// freeRecord reports whether k is the hash of a free Lock (or SpinLock, or
// FairLock): it keeps the last token and the latch of the last final
// releases, or void marks (~x, scripts/void_common.lua), and no hold (no
// ~g); or a hash of another kind with nothing but void marks.
func freeRecord(t testing.TB, rdb redis.UniversalClient, k string) bool {
	t.Helper()
	if !ownTail(k) {
		return voidMarksOnly(t, rdb, k)
	}
	f, err := rdb.HMGet(context.Background(), k, "~g", "~t", "~x").Result()
	require.NoError(t, err)
	return f[0] == nil && (f[1] != nil || f[2] != nil)
}

// voidMarksOnly reports whether k is a hash whose one field is ~x: the void
// marks a settled acquire leaves, for the unlock latch's time, in the main
// hash of a name that is free otherwise.
func voidMarksOnly(t testing.TB, rdb redis.UniversalClient, k string) bool {
	t.Helper()
	if rdb.Type(context.Background(), k).Val() != "hash" {
		return false
	}
	keys, err := rdb.HKeys(context.Background(), k).Result()
	require.NoError(t, err)
	return len(keys) == 1 && keys[0] == "~x"
}

// latchMark reports whether k is a CountDownLatch's mark, which outlives
// the latch by design for relock.LatchMarkTTL.
func latchMark(k string) bool { return strings.HasSuffix(k, ":latch:past") }

// requireLatchMarkExpires checks that the latch mark k expires within
// relock.LatchMarkTTL.
func requireLatchMarkExpires(t testing.TB, rdb redis.UniversalClient, k string) {
	t.Helper()
	ttl := pttl(t, rdb, k)
	if ttl == -2 {
		return // expired since it was listed
	}
	require.Greater(t, ttl, time.Duration(0), "%s must expire", k)
	require.LessOrEqual(t, ttl, relock.LatchMarkTTL, "%s outlives its TTL", k)
}

// keysLeft lists the keys that are not tails or latches, and checks that
// every tail and latch expires within the default unlock latch.
func keysLeft(t testing.TB, rdb redis.UniversalClient) []string {
	t.Helper()
	var out []string
	for _, k := range allKeys(t, rdb) {
		if latchMark(k) {
			requireLatchMarkExpires(t, rdb, k)
			continue
		}
		if !leftover(t, rdb, k) {
			out = append(out, k)
			continue
		}
		ttl := pttl(t, rdb, k)
		if ttl == -2 {
			continue // expired since it was listed: not left
		}
		assert.Greater(t, ttl, time.Duration(0), "%s must expire", k)
		assert.LessOrEqual(t, ttl, defaultUnlockLatch, "%s outlives the unlock latch", k)
		n, err := rdb.HLen(context.Background(), k).Result()
		if assert.NoError(t, err, k) {
			assert.Positive(t, n, "a tail keeps a token or a latch: %s", k)
		}
	}
	return out
}

// requireOnlyExpiringLeftovers checks that nothing is left in Redis but
// tails and latches, each with a TTL no longer than the unlock latch.
func requireOnlyExpiringLeftovers(t testing.TB, rdb redis.UniversalClient) {
	t.Helper()
	require.Empty(t, keysLeft(t, rdb), "only tails and latches may outlive a free lock")
}

// granted is the outcome of a Lock call made in the background.
type granted struct {
	ctx context.Context
	err error
}

// lockAsync calls Lock in a goroutine and delivers the outcome.
func lockAsync(l exclusive) <-chan granted {
	out := make(chan granted, 1)
	go func() {
		ctx, err := l.Lock(context.Background())
		out <- granted{ctx, err}
	}()
	return out
}
