package relock_test

import (
	"context"
	"testing"
	"time"

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
}

// exclusiveKinds are the lock types the topology and fault suites cover.
var exclusiveKinds = []lockKind{
	{
		name:  "Lock",
		open:  func(c *relock.Client, name string) exclusive { return c.Lock(name) },
		keyOf: func(c *relock.Client, name string) string { return c.Lock(name).Key() },
	},
	{
		name:  "FairLock",
		open:  func(c *relock.Client, name string) exclusive { return c.FairLock(name) },
		keyOf: func(c *relock.Client, name string) string { return c.FairLock(name).Key() },
	},
	{
		name:  "WriteLock",
		open:  func(c *relock.Client, name string) exclusive { return c.RWLock(name).WriteLock() },
		keyOf: func(c *relock.Client, name string) string { return c.RWLock(name).Key() },
	},
}

// eachKind runs f as a subtest for every exclusive lock type.
func eachKind(t *testing.T, f func(t *testing.T, k lockKind)) {
	for _, k := range exclusiveKinds {
		t.Run(k.name, func(t *testing.T) { f(t, k) })
	}
}
