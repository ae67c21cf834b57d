package relock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxReplicas bounds WithReplicas: more replicas than that is a mistake.
const maxReplicas = 1000

// WithReplicas makes Lock and TryLock (of Lock, FairLock and RWLock's read
// and write locks) return a hold only once the write that
// granted it has reached at least n replicas, checked with Redis's WAIT,
// waiting at most timeout for them. The WAIT is pipelined after the acquire
// script (on a Cluster, to the master of the lock's slot), so it costs no
// extra round trip — only the replicas' acknowledgement delay.
//
// What it buys: with Sentinel or Cluster, a failover that promotes one of
// those replicas right after Lock returned keeps the hold, instead of losing
// it with the unreplicated write and granting the lock to a second owner. What
// it does not buy: the replica that acknowledged is not necessarily the one
// promoted, WAIT does not make Redis strongly consistent, and renewals and
// releases are not waited for. Fencing tokens remain the real protection.
//
// What it costs: Lock waits for the slowest of the n replicas. When fewer
// than n acknowledge within timeout, or the server rejects WAIT (a replica,
// an ACL without +wait, a server that does not implement it), the hold just
// granted is released again (one more round trip) and Lock fails with an
// error wrapping both ErrNotObtained and ErrNotReplicated (and the server's
// error, if any). timeout must be shorter than the go-redis client's
// ReadTimeout, or the read would time out first; New reports that as
// ErrInvalidArgument. n = 0 turns the check off (the default).
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
	return c.rdb, nil
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
