package relock

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"
)

// noteFault reacts to an error a Redis call returned. The funnel (call.go)
// calls it for every request; only the subscriber's connections call it
// themselves. On a Cluster, a network
// error (not a reply from a server) usually means the node is gone and a
// replica is taking over its slots; go-redis only reloads its slot map on
// MOVED or every few seconds, so until then every command for those slots —
// acquire, renewal, the subscriber's reconnect — would keep dialling the dead
// node. Asking for a reload (asynchronous, deduplicated by go-redis) lets them
// find the promoted master as soon as the cluster has one.
//
// Such an error, or a reply saying the server is loading its data or is a
// replica now, may also mean Redis restarted or failed over and forgot
// locks: every hold of the Client is checked at once (recheckHolds), so
// that holders whose locks are gone are told now, not at the next renewal.
//
// It is named for faults, not events: the Observer hooks (observer.go,
// observed) only report, while noteFault acts on the fault it is given.
func (c *Client) noteFault(err error) {
	c.noteDial(err)
	if err == nil {
		return
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		if r := refusedBy(err); r != nil && r.forgets {
			c.recheckHolds(reply.Error())
		}
		return // a server answered: the topology is not the problem
	}
	if !outcomeUnknown(err) {
		return // not a network fault (e.g. ErrUpgrade, found locally)
	}
	c.recheckHolds("network error")
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// transient reports whether an attempt that failed with err may succeed if
// simply made again: no reply came (the network failed), or Redis refused
// it for a state it leaves by itself (refusedBy: busy with a script, out
// of memory, between roles, resharding). Every path that retries asks
// here: a waiter's attempt (ride), a release or a queue's leave retried in
// the background (retryUntil).
func transient(err error) bool {
	switch {
	case errors.Is(err, redis.ErrClosed), errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrClientClosed), errors.Is(err, ErrUpgrade),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true
	}
	r := refusedBy(err)
	return r != nil && r.passes
}

// noteDial keeps the last dial error the Client's requests got (see
// unanswered), until a request is answered.
func (c *Client) noteDial(err error) {
	if err == nil { // the common case: no error value to inspect
		if c.lastDial.Load() != nil {
			c.lastDial.Store(nil)
		}
		return
	}
	var op *net.OpError
	var reply redis.Error
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		c.lastDial.Store(op)
	case errors.As(err, &reply):
		c.lastDial.Store(nil)
	}
}

// unanswered is why a request cut short by its bound has no reply, as an
// error wrapping ErrUnavailable. mayRun says what the request may still do
// in Redis; it is said only when the request can have been sent. With no
// connection to Redis open, the request is still waiting for one: nothing
// was sent, and the last dial error says why.
func (c *Client) unanswered(mayRun string) error {
	if c.rdb.PoolStats().TotalConns == 0 {
		if op := c.lastDial.Load(); op != nil {
			return fmt.Errorf("%w: no connection to Redis, nothing sent: %w", ErrUnavailable, op)
		}
		return fmt.Errorf("%w: no connection to Redis yet, nothing sent", ErrUnavailable)
	}
	if mayRun == "" {
		return fmt.Errorf("%w: Redis had not answered", ErrUnavailable)
	}
	return fmt.Errorf("%w: Redis had not answered (%s)", ErrUnavailable, mayRun)
}
