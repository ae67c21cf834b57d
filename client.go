package relock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// A Client hands out locks backed by one Redis deployment. Create one per
// process and share it: it holds the process's identity (a UUID that prefixes
// every owner it writes), the one watchdog that renews leases, and the one
// pub/sub subscriber on which waiters sleep.
//
// All methods are safe for concurrent use.
type Client struct {
	rdb     redis.UniversalClient
	id      string
	opts    options
	log     *slog.Logger
	err     error // construction error, returned by every call
	sharded bool

	holds registry
	subs  *subscriber
	dog   *watchdog

	reqSeq atomic.Uint64

	closeOnce sync.Once
	closed    atomic.Bool
	closing   chan struct{} // closed by Close; wakes every wait
}

// New returns a Client on rdb, which may be any go-redis client: a
// *redis.Client, a *redis.ClusterClient or a Sentinel failover client. rdb
// stays the caller's: Close does not close it.
//
// New sends nothing to Redis. A nil rdb or an invalid option does not panic:
// every call on the Client then returns an error wrapping ErrInvalidArgument
// (see Err).
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	c := &Client{rdb: rdb, id: uuid.NewString(), opts: defaultOptions(), closing: make(chan struct{})}
	for _, opt := range opts {
		if opt == nil {
			c.err = fmt.Errorf("%w: nil option", ErrInvalidArgument)
			continue
		}
		if err := opt(&c.opts); err != nil && c.err == nil {
			c.err = err
		}
	}
	if rdb == nil {
		c.err = fmt.Errorf("%w: nil redis client", ErrInvalidArgument)
	} else if c.opts.replicas > 0 && c.err == nil {
		c.err = checkReplicaTimeout(rdb, c.opts.replicaTimeout)
	}
	_, isCluster := rdb.(*redis.ClusterClient)
	c.sharded = isCluster
	if c.opts.sharded != nil {
		c.sharded = *c.opts.sharded
	}
	c.log = c.opts.logger.With("client", c.id)
	c.holds.init()
	c.subs = newSubscriber(c)
	c.dog = newWatchdog(c)
	return c
}

// ID returns the Client's UUID, which starts every owner it writes to Redis.
func (c *Client) ID() string { return c.id }

// Err returns the error that makes every call fail, if New was given a nil
// client or an invalid option, or ErrClientClosed after Close.
func (c *Client) Err() error {
	if c.err != nil {
		return c.err
	}
	if c.closed.Load() {
		return ErrClientClosed
	}
	return nil
}

// Close stops the watchdog and the subscriber and waits for every goroutine
// the Client started to exit. It does not release held locks: their leases run
// out in Redis. The contexts of holds still open are cancelled with cause
// ErrClientClosed, since nothing renews them any more. Waiters return an error
// wrapping ErrClientClosed; later calls to Lock fail the same way, while Unlock
// still releases holds so that a deferred Unlock frees the lock at once.
//
// Close is safe to call more than once; calls after the first return nil.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.closing)
		c.dog.close()
		c.subs.close()
		c.holds.cancelAll(ErrClientClosed)
	})
	return nil
}

func (c *Client) usable() error {
	if c == nil {
		return fmt.Errorf("%w: nil *relock.Client", ErrInvalidArgument)
	}
	return c.Err()
}

func (c *Client) publishCommand() string {
	if c.sharded {
		return "spublish"
	}
	return "publish"
}

// fencingArg tells an acquire script whether to hand out fencing tokens.
func (c *Client) fencingArg() string {
	if c.opts.fencing {
		return "1"
	}
	return "0"
}

func (c *Client) newRequestID() string {
	return c.id + ":" + strconv.FormatUint(c.reqSeq.Add(1), 10)
}

// latchKey returns a key name unique to one request: prefix, the Client's
// UUID and a sequence number, built with one allocation.
func (c *Client) latchKey(prefix string) string {
	b := make([]byte, 0, len(prefix)+len(c.id)+22)
	b = append(b, prefix...)
	b = append(b, c.id...)
	b = append(b, ':')
	b = strconv.AppendUint(b, c.reqSeq.Add(1), 10)
	return string(b)
}

// owner is what a context carries to identify the holder of a lock, the Go
// counterpart of Redisson's thread id.
type owner struct {
	id       string
	explicit bool // id is used as-is, not prefixed with the Client's UUID
}

type ownerKey struct{}

// ownerSeq numbers owners for the whole process, not per Client: one context
// may hold locks of several Clients (MultiLock, RedLock, or simply the same
// context passed to two Clients), and a per-Client sequence would give two
// different owners the same field "<uuid>:<n>" on the second Client.
var ownerSeq atomic.Uint64

// withNewOwner returns ctx and the owner it carries, giving it a new owner
// when it has none.
func withNewOwner(ctx context.Context) (context.Context, *owner) {
	if o := ownerFrom(ctx); o != nil {
		return ctx, o
	}
	o := &owner{id: strconv.FormatUint(ownerSeq.Add(1), 10)}
	return context.WithValue(ctx, ownerKey{}, o), o
}

func ownerFrom(ctx context.Context) *owner {
	o, _ := ctx.Value(ownerKey{}).(*owner)
	return o
}

// field is the owner as written in Redis by Client c.
func (o *owner) field(c *Client) string {
	if o.explicit {
		return o.id
	}
	return c.id + ":" + o.id
}

// WithOwner returns a context whose holds belong to the given owner id,
// written to Redis verbatim. It is for the rare hand-over of a hold between
// processes, or resuming one after a restart: every process that uses the same
// id is the same owner. Two processes must not use one owner id at the same
// time on the same lock. For all other uses, let Lock create the owner.
func WithOwner(ctx context.Context, id string) (context.Context, error) {
	if id == "" {
		return ctx, fmt.Errorf("%w: empty owner id", ErrInvalidArgument)
	}
	return context.WithValue(ctx, ownerKey{}, &owner{id: id, explicit: true}), nil
}

// OwnerOf reports the owner that ctx carries and whether it carries one. The
// owner as written in Redis is "<Client.ID()>:<id>" unless it was set with
// WithOwner.
func OwnerOf(ctx context.Context) (id string, ok bool) {
	if o := ownerFrom(ctx); o != nil {
		return o.id, true
	}
	return "", false
}

// wrapRedis makes a Redis or network error recognisable as coming from relock
// without hiding it from errors.Is/As.
func wrapRedis(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrClientClosed) {
		return err
	}
	return fmt.Errorf("relock: %s: %w", op, err)
}

func (c *Client) isCluster() bool {
	_, ok := c.rdb.(*redis.ClusterClient)
	return ok
}
