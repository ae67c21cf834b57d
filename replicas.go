package relock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxReplicas bounds WithReplicas: more replicas than that is a mistake.
const maxReplicas = 1000

// WithReplicas makes an acquire wait, at most timeout, for n replicas to have
// its grant, or fail with ErrNotReplicated, taken back (docs/kinds.md).
func WithReplicas(n int, timeout time.Duration) Option {
	return func(o *options) error {
		if n < 0 || n > maxReplicas {
			return fmt.Errorf("%w: replicas %d is outside [0, %d]", ErrInvalidArgument, n, maxReplicas)
		}
		if n > 0 {
			if err := checkDuration("replica timeout", timeout); err != nil {
				return err
			}
		}
		o.replicas, o.replicaTimeout = n, timeout
		return nil
	}
}

// checkReplicaTimeout rejects a WAIT timeout the client's read timeout would
// cut short.
func checkReplicaTimeout(rdb redis.UniversalClient, timeout time.Duration) error {
	var rt time.Duration
	switch r := rdb.(type) {
	case *redis.Client:
		rt = r.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = r.Options().ReadTimeout
	default:
		return nil
	}
	if rt > 0 && timeout >= rt {
		return fmt.Errorf("%w: replica timeout %v is not shorter than the client's ReadTimeout %v", ErrInvalidArgument, timeout, rt)
	}
	return nil
}

// waitTarget is where the WAIT after an acquire script on key must go: the
// connection the script runs on. WAIT has no key: sent through a Cluster
// client it would go to a random node, so there it is the master of key's
// slot.
func (c *Client) waitTarget(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return c.rdbFor(ctx), nil
}

// queueWait adds WithReplicas's WAIT to pipe.
func (c *Client) queueWait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	wait := redis.NewIntCmd(ctx, "wait", c.opts.replicas, c.opts.replicaTimeout.Milliseconds())
	_ = pipe.Process(ctx, wait)
	return wait
}

// replicated reads the WAIT's reply: nil when enough replicas acknowledged,
// otherwise why not (wrapping ErrNotObtained and ErrNotReplicated).
func (c *Client) replicated(wait *redis.IntCmd) error {
	acked, err := wait.Result()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w: the server rejected WAIT: %w", ErrNotObtained, ErrNotReplicated, err)
	case int(acked) < c.opts.replicas:
		return fmt.Errorf("%w: %w: %d of %d replicas acknowledged the lock within %v",
			ErrNotObtained, ErrNotReplicated, acked, c.opts.replicas, c.opts.replicaTimeout)
	}
	return nil
}
