package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/redis/go-redis/v9"
)

// floorLease is the lease of the floor's and redislock's keys: relock's
// default watchdog lease, so that no library writes a shorter-lived key.
const floorLease = 30 * time.Second

// floorRetry is how often the floor polls a busy lock. It has no wake-up
// mechanism; 1 ms keeps its hand-off near the network's own latency, at a
// price in commands that the report shows. See pollSleep for how it sleeps.
const floorRetry = time.Millisecond

// floorRelease deletes the key only if it still holds our token.
var floorRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)

func floorLibrary() Library {
	return Library{
		Name:     FloorName,
		Strategy: "SET NX PX + compare-and-delete script; polls a busy lock every 1 ms",
		New: func(addr, prefix string, c *Counter) (Locker, error) {
			return &floorLocker{rdb: newGoredis(addr, c), prefix: prefix}, nil
		},
	}
}

type floorLocker struct {
	rdb    *redis.Client
	prefix string
}

func (f *floorLocker) Lock(ctx context.Context, name string) (Unlocker, error) {
	key := f.prefix + name
	token := randomToken()
	for {
		ok, err := f.rdb.SetNX(ctx, key, token, floorLease).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return floorHold{f.rdb, key, token}, nil
		}
		if err := pollSleep(ctx, floorRetry); err != nil {
			return nil, err
		}
	}
}

func (f *floorLocker) Close() error { return f.rdb.Close() }

type floorHold struct {
	rdb        *redis.Client
	key, token string
}

func (h floorHold) Unlock(ctx context.Context) error {
	n, err := floorRelease.Run(ctx, h.rdb, []string{h.key}, h.token).Int64()
	if err == nil && n != 1 {
		return errClosed
	}
	return err
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}
