package redistest

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Knows reports whether the server c reaches has the command name (COMMAND
// INFO answers nil for a command it does not know): SPUBLISH, for one,
// exists from Redis 7.0 on and in Valkey, not in Redis 6.2. A failed query
// reports false.
func Knows(ctx context.Context, c redis.UniversalClient, name string) bool {
	v, err := c.Do(ctx, "command", "info", name).Slice()
	return err == nil && len(v) == 1 && v[0] != nil
}

// ShardedPubSub reports whether the server c reaches offers sharded pub/sub
// (SPUBLISH, SSUBSCRIBE): relock uses it on a Cluster that does, classic
// pub/sub on one that does not.
func ShardedPubSub(ctx context.Context, c redis.UniversalClient) bool {
	return Knows(ctx, c, "spublish")
}

// connectionSetup are the commands a go-redis client sends on each new
// connection: counting commands, a test leaves them out, since which of
// them a server accepts differs (CLIENT SETINFO: Redis 7.2 and Valkey).
// Redis 6.2 counts every CLIENT subcommand, the refused SETINFO included,
// as "client"; relock sends no CLIENT command of its own.
var connectionSetup = []string{"hello", "auth", "client", "client|setinfo", "client|setname", "select"}

// DropConnectionSetup removes the connection set-up commands from a
// CommandCalls snapshot.
func DropConnectionSetup(calls map[string]int64) map[string]int64 {
	for _, name := range connectionSetup {
		delete(calls, name)
	}
	return calls
}
