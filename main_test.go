package relock_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestMain silences go-redis's own log: the tests stop, pause and cut
// servers on purpose, and the pool's dial errors that follow would bury a
// failing test's output. RELOCK_REDIS_LOG=1 keeps it.
func TestMain(m *testing.M) {
	if os.Getenv("RELOCK_REDIS_LOG") == "" {
		redis.SetLogger(discardRedisLog{})
	}
	os.Exit(m.Run())
}

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}
