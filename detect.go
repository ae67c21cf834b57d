package relock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// What the server offers. Redis 6.2 (and a server whose ACL refuses it)
// has no sharded pub/sub (SPUBLISH, SSUBSCRIBE: Redis 7.0); everything else
// relock sends exists from Redis 6.2 on, in Valkey too (CLIENT SETINFO,
// which Redis 7.0 lacks, is go-redis's, which ignores its refusal; WAIT is
// checked by WithReplicas's own reply). So the one thing detected is the
// pub/sub mode, and only where it is not fixed by the client's type:
//
//   - a *redis.ClusterClient without WithShardedPubSub uses sharded pub/sub
//     where the server offers it, else classic pub/sub;
//   - WithShardedPubSub(true) requires it: the first call fails with
//     ErrUnsupported where the server lacks it;
//   - anything else uses classic pub/sub, and probes nothing.
//
// The probe is one SPUBLISH of an empty message on <prefix>:probe:<key>,
// a channel nobody listens on in the slot of the key (or channel) the
// call is about, so that it asks the node the call needs and no other: a
// master down elsewhere does not hold it up. It is sent once, by the first
// call that reaches the funnel (or the subscriber, whichever comes first);
// every later call pays one atomic load. SPUBLISH rather than COMMAND INFO
// or PUBSUB SHARDNUMSUB: the README's least-privilege ACL allows it and
// refuses those.

// A detector runs the probe once per Client.
type detector struct {
	done atomic.Bool // decided: err and the mode are set for good
	err  error       // what every call returns once done (nil: usable)

	mu      sync.Mutex
	running chan struct{} // closed when the probe in flight ends; nil if none
}

// modeArg is a script argument that depends on the pub/sub mode detect
// decides (the publish command, the blind flag), boxed once by New before
// the mode is known: go-redis writes it (MarshalBinary) when the call is
// sent, which is always after detect.
type modeArg struct {
	sharded *atomic.Bool
	on, off []byte // written when sharded, when classic
}

func (a *modeArg) MarshalBinary() ([]byte, error) {
	if a.sharded.Load() {
		return a.on, nil
	}
	return a.off, nil
}

func (a *modeArg) String() string {
	b, _ := a.MarshalBinary()
	return string(b)
}

// initMode sets the pub/sub mode where the client type and the options
// fix it, and marks it for the probe otherwise.
func (c *Client) initMode() {
	cluster := c.isCluster()
	switch {
	case c.opts.sharded != nil && *c.opts.sharded:
		c.sharded.Store(true) // to be confirmed by the probe
	case c.opts.sharded != nil || !cluster:
		c.detect.done.Store(true)
	default:
		c.sharded.Store(true) // the Cluster's default, unless the probe says otherwise
	}
}

// ready returns nil once the server's pub/sub mode is known (see above),
// probing it the first time; the error of a probe that could not decide
// (the network, a server between roles, ctx) is returned and the next call
// probes again. The error that makes the Client unusable (ErrUnsupported)
// is returned by every call.
// key is a key or channel of the call (the probe goes to its slot), or "".
func (c *Client) ready(ctx context.Context, key string) error {
	if c.detect.done.Load() {
		return c.detect.err
	}
	return c.probe(ctx, key)
}

func (c *Client) probe(ctx context.Context, key string) error {
	d := &c.detect
	for {
		d.mu.Lock()
		if d.done.Load() {
			d.mu.Unlock()
			return d.err
		}
		if running := d.running; running != nil {
			d.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		running := make(chan struct{})
		d.running = running
		d.mu.Unlock()

		err := c.probeSharded(ctx, key)

		d.mu.Lock()
		d.running = nil
		close(running)
		d.mu.Unlock()
		return err
	}
}

// probeSharded sends the probe and decides from its reply; it returns the
// error of a probe that decided nothing.
func (c *Client) probeSharded(ctx context.Context, key string) error {
	channel := c.opts.prefix + ":probe"
	if key != "" {
		channel += ":" + key // its hash tag, so its slot
	}
	_, err := request(c, "probe sharded pub/sub", c.rdb.SPublish(ctx, channel, "").Result)
	var reply redis.Error
	if err != nil && (!errors.As(err, &reply) || transient(err)) {
		return err
	}
	forced := c.opts.sharded != nil
	switch {
	case err == nil:
		c.log.Debug("relock: the server offers sharded pub/sub")
	case forced:
		c.detect.err = fmt.Errorf("%w: WithShardedPubSub(true): the server refuses SPUBLISH (sharded pub/sub needs Redis 7.0 or Valkey, and the ACL +spublish +ssubscribe +sunsubscribe): %w", ErrUnsupported, err)
	default:
		c.sharded.Store(false)
		c.log.Info("relock: the server refuses SPUBLISH; waiters use classic pub/sub", "reply", firstLine(err))
	}
	c.detect.done.Store(true)
	return c.detect.err
}

// firstLine is the first line of a server's reply, for the log.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
