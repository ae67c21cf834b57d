package relock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock"
)

// exclusive is what the topology and fault suites need of a lock type: an
// exclusive, reentrant acquire/release with fencing tokens. Every such type
// joins the suites by adding itself to exclusiveKinds.
type exclusive interface {
	Lock(ctx context.Context) (context.Context, error)
	TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error)
	Unlock(ctx context.Context) error
	Token(ctx context.Context) (int64, error)
}

// lockKind is one lock type as the suites run it: name picks the subtest,
// open returns the lock called name on c, and keyOf the Redis key that holds
// its owners (what HGETALL shows).
type lockKind struct {
	name  string
	open  func(c *relock.Client, name string) exclusive
	keyOf func(c *relock.Client, name string) string
	// channelOf is the channel a waiter of Client c sleeps on.
	channelOf func(c *relock.Client, name string) string
	// holders turns the lock hash into owner → count, checking the fields
	// that go with each holder (generation, last op, token).
	holders func(t testing.TB, hash map[string]string) map[string]string
}

// waiterSubscribed reports whether Client c's waiters of the lock called
// name are subscribed on the server.
func (k lockKind) waiterSubscribed(rdb redis.UniversalClient, c *relock.Client, name string) bool {
	ch := k.channelOf(c, name)
	n, err := rdb.PubSubNumSub(context.Background(), ch).Result()
	return err == nil && n[ch] == 1
}

// state returns the holders of the lock whose hash is key, as owner → count.
func (k lockKind) state(t testing.TB, rdb redis.UniversalClient, key string) map[string]string {
	t.Helper()
	return k.holders(t, hgetall(t, rdb, key))
}

// writers returns the write holders of an RWLock hash, owner → count,
// checking that each has its deadline, generation and last-op fields and
// that the hash keeps the write hold's token. The hash keeps "w:<owner>" →
// count, "wd:", "wg:", "wo:" per write holder, "r:", "rd:", "rg:", "ro:"
// per reader, and "~t".
func writers(t testing.TB, hash map[string]string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for f, v := range hash {
		if owner, ok := strings.CutPrefix(f, "w:"); ok {
			out[owner] = v
			for _, kind := range []string{"wd:", "wg:", "wo:"} {
				assert.NotEmpty(t, hash[kind+owner], "field %s of a write holder: %v", kind+owner, hash)
			}
			assert.NotEmpty(t, hash["~t"], "the token of a write hold: %v", hash)
		}
	}
	return out
}

// exclusiveKinds are the lock types the topology and fault suites cover.
var exclusiveKinds = []lockKind{
	{
		name:      "Lock",
		open:      func(c *relock.Client, name string) exclusive { return c.Lock(name) },
		keyOf:     func(c *relock.Client, name string) string { return c.Lock(name).Key() },
		channelOf: func(c *relock.Client, name string) string { return c.Lock(name).Key() + ":w:" + c.ID() },
		holders:   ownersOf,
	},
	{
		name:      "FairLock",
		open:      func(c *relock.Client, name string) exclusive { return c.FairLock(name) },
		keyOf:     func(c *relock.Client, name string) string { return c.FairLock(name).Key() },
		channelOf: func(c *relock.Client, name string) string { return c.FairLock(name).Key() + ":w:" + c.ID() },
		holders:   ownersOf,
	},
	{
		name:      "WriteLock",
		open:      func(c *relock.Client, name string) exclusive { return c.RWLock(name).WriteLock() },
		keyOf:     func(c *relock.Client, name string) string { return c.RWLock(name).Key() },
		channelOf: func(c *relock.Client, name string) string { return c.RWLock(name).Key() + ":w:" + c.ID() },
		holders:   writers,
	},
}

// eachKind runs f as a subtest for every exclusive lock type.
func eachKind(t *testing.T, f func(t *testing.T, k lockKind)) {
	for _, k := range exclusiveKinds {
		t.Run(k.name, func(t *testing.T) { f(t, k) })
	}
}
