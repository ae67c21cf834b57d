package relock

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// A Client hands out locks on one Redis deployment; share one per process.
type Client struct {
	rdb  redis.UniversalClient
	id   string
	opts options
	log  *slog.Logger
	err  error // construction error, returned by every call
	// sharded: waiters use sharded pub/sub (SSUBSCRIBE, SPUBLISH), as
	// detect decides (detect.go).
	sharded atomic.Bool
	detect  detector
	// pastDeadline is how long a command rdb has begun may run past its
	// context's deadline (0: rdb ends it there, see pastDeadline; -1:
	// unbounded): Unlock runs its release inline when that fits in the
	// unlock timeout.
	pastDeadline time.Duration
	// copies is how go-redis may send a request of rdb's twice (copies.go).
	copies copyRisk
	// clones end their requests by a bound when rdb does not (clones.go).
	clones timeoutClones

	holds    registry
	coalesce coalescer // lock calls issued at the same time share a round trip
	subs     *subscriber
	dog      *watchdog
	bg       sync.WaitGroup // background clean-ups (releaseInBackground)
	// bgMu guards bgStopped, set by Close before it waits for bg: no
	// goroutine joins bg after that (see goBackground).
	bgMu      sync.Mutex
	bgStopped bool
	releases  releaseRetrier // RedLock releases this Client's master did not confirm

	// args holds the script arguments that depend only on the options,
	// boxed once (see scriptArgs): boxing them per call was an allocation
	// each.
	args scriptArgs

	reqSeq   atomic.Uint64
	lastDial atomic.Pointer[net.OpError] // see noteDial
	presence atomic.Bool                 // the subscriber keeps the Client's own channel (keepPresence)

	closeOnce sync.Once
	closed    atomic.Bool
	closing   chan struct{} // closed by Close; wakes every wait
	calls     lockCalls     // Lock calls in flight, which Close waits for (calls.go)
	workers   *workers      // run the bounded calls (workers.go)
}

// New returns a Client on rdb, which Close leaves open; see Client.Err.
// Add rdb's hooks before New: bounded calls may run on clones of a
// *redis.Client that New makes with the hooks it has then (clones.go).
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	c := &Client{rdb: rdb, id: newClientID(), opts: defaultOptions(), closing: make(chan struct{})}
	c.workers = newWorkers(c.closing)
	for _, opt := range opts {
		if opt == nil {
			c.err = fmt.Errorf("%w: nil option", ErrInvalidArgument)
			continue
		}
		if err := opt(&c.opts); err != nil && c.err == nil {
			c.err = err
		}
	}
	if isNil(rdb) {
		c.err = fmt.Errorf("%w: nil redis client", ErrInvalidArgument)
		rdb = nil
		c.rdb = nil
	} else if c.opts.replicas > 0 && c.err == nil {
		c.err = checkReplicaTimeout(rdb, c.opts.replicaTimeout)
	}
	c.pastDeadline = pastDeadline(rdb)
	c.copies = copyRiskOf(rdb)
	c.initClones(rdb)
	c.initMode()
	if c.opts.logger == nil {
		c.opts.logger = slog.Default()
	}
	if c.opts.name == "" {
		c.opts.name = defaultName()
	}
	c.log = c.opts.logger.With("client", c.id)
	c.args = c.newScriptArgs()
	c.holds.init()
	c.calls.init()
	c.subs = newSubscriber(c)
	c.dog = newWatchdog(c)
	return c
}

// ID returns the Client's id, which starts every owner it writes to Redis.
func (c *Client) ID() string { return c.id }

// newClientID returns a new Client id (see ID). It is the same randomness
// as a UUID's 36-character text in 22 characters: the id is written about
// five times per Lock+Unlock (owner, op ids, generation) and into each of a
// lock's latch entries, so its length is paid on the wire and in Redis
// memory (MEMORY USAGE on Redis 7.0 of a busy FairLock's tail, 64 latch
// slots: 2120 bytes against 3144 with the UUID's text).
func newClientID() string {
	u := uuid.New()
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// Err returns the error that makes every call fail, if any.
func (c *Client) Err() error {
	if c.err != nil {
		return c.err
	}
	if c.closed.Load() {
		return ErrClientClosed
	}
	return nil
}

// Close releases the Client's holds and shuts it down (see "Close" above).
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.closing)
		until := time.Now().Add(c.opts.unlockTimeout)
		c.dog.abandon()
		c.subs.close()
		c.endContexts()
		c.releaseHolds(until)
		c.cancelAll(ErrClientClosed)
		c.calls.drain(until)
		c.bgMu.Lock()
		c.bgStopped = true
		c.bgMu.Unlock()
		c.dog.close(until)
		awaitGroup(&c.subs.wg, until)
		awaitGroup(&c.bg, until)
	})
	return nil
}

// goBackground runs f in a goroutine that Close waits for, and reports
// whether it did: once Close has begun waiting, it starts nothing (a
// WaitGroup must not gain members while it is waited on).
func (c *Client) goBackground(f func()) bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bgStopped {
		return false
	}
	c.bg.Go(f)
	return true
}

// goSettle runs f, which settles a request still in flight (it returns once
// that request has), in the background: in a goroutine Close waits for, or,
// once Close has begun waiting, in one it does not, since the request must
// still be settled and the caller must not wait for it.
func (c *Client) goSettle(f func()) {
	if !c.goBackground(f) {
		go f()
	}
}

// errNilClient is what every call on a nil *Client returns: a caller's
// mistake, not a Client that was closed.
var errNilClient = fmt.Errorf("%w: nil *relock.Client", ErrInvalidArgument)

func (c *Client) usable() error {
	if c == nil {
		return errNilClient
	}
	return c.Err()
}

// queryable is usable for the calls that work after Close: the queries
// and the releases, which only read or end what exists.
func (c *Client) queryable() error {
	if err := c.usable(); err != nil && !errors.Is(err, ErrClientClosed) {
		return err
	}
	return nil
}

// isNil reports whether rdb is nil, also when it is a typed nil pointer in
// the interface ((*redis.Client)(nil)), which would panic on first use.
func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	switch r := rdb.(type) {
	case *redis.Client:
		return r == nil
	case *redis.ClusterClient:
		return r == nil
	case *redis.Ring:
		return r == nil
	}
	return false
}

// recheckHolds makes the watchdog check every hold of this Client at once,
// leased ones included: Redis may have restarted or failed over (a
// connection dropped and came back, a LOADING or READONLY reply), and the
// holders whose locks are gone must be told now, not at the next renewal.
// It never blocks.
func (c *Client) recheckHolds(reason string) {
	if c.dog.kick() {
		c.log.Debug("relock: checking every hold", "reason", reason)
	}
}

// leaseFor is the lease a hold asked with lease is taken with: the watchdog
// lease for 0.
func (c *Client) leaseFor(lease time.Duration) time.Duration {
	if lease == 0 {
		return c.opts.watchdogLease
	}
	return lease
}

// owner is what a context carries to identify the holder of a lock, the Go
// counterpart of Redisson's thread id.
type owner struct {
	// text is the owner's id or, with a home, its field there: home is the
	// Client the owner was made for (by its first Lock), whose Lock and
	// Unlock then build no string. Set at creation, never changed.
	text     string
	home     *Client
	explicit bool // the id is used as-is, not prefixed with the Client's id
}

// id is the owner's id (see OwnerOf).
func (o *owner) id() string {
	if o.home != nil {
		return o.text[len(o.home.id)+1:]
	}
	return o.text
}

type ownerKey struct{}

// ownerSeq numbers owners for the whole process, not per Client: one context
// may hold locks of several Clients (MultiLock, RedLock, or simply the same
// context passed to two Clients), and a per-Client sequence would give two
// different owners the same field "<client id>:<n>" on the second Client.
var ownerSeq atomic.Uint64

// withNewOwner returns ctx and the owner it carries, giving it a new owner,
// made for Client c, when it has none.
func withNewOwner(ctx context.Context, c *Client) (context.Context, *owner) {
	if o := ownerFrom(ctx); o != nil {
		return ctx, o
	}
	if c == nil {
		return withOwner(ctx, owner{text: strconv.FormatUint(ownerSeq.Add(1), 10)})
	}
	return withNewOwnerOf(ctx, c)
}

func ownerFrom(ctx context.Context) *owner {
	o, _ := ctx.Value(ownerKey{}).(*owner)
	return o
}

// field is the owner as written in Redis by Client c.
func (o *owner) field(c *Client) string {
	if o.explicit || c == o.home {
		return o.text
	}
	return c.id + ":" + o.id()
}

// WithOwner returns a context whose holds belong to owner id, to resume a
// hold after a restart; one owner id must not hold a lock twice at once.
func WithOwner(ctx context.Context, id string) (context.Context, error) {
	if ctx == nil {
		return ctx, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if id == "" || strings.HasPrefix(id, "~") || strings.ContainsAny(id, "\x00") {
		return ctx, fmt.Errorf("%w: owner id %q is empty, starts with '~' (reserved) or contains NUL", ErrInvalidArgument, id)
	}
	ctx, _ = withOwner(ctx, owner{text: id, explicit: true})
	return ctx, nil
}

// NewOwner returns ctx as a new owner, excluded by ctx's own owner.
func NewOwner(ctx context.Context) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, _ = withOwner(ctx, owner{text: strconv.FormatUint(ownerSeq.Add(1), 10)})
	return ctx
}

// OwnerOf reports the owner ctx carries.
func OwnerOf(ctx context.Context) (id string, ok bool) {
	if o := ownerFrom(ctx); o != nil {
		return o.id(), true
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
	if layout := layoutRefusal(err); layout != err {
		return fmt.Errorf("relock: %s: %w", op, layout)
	}
	return fmt.Errorf("relock: %s: %w", op, unavailable(err))
}

func (c *Client) isCluster() bool {
	_, ok := c.rdb.(*redis.ClusterClient)
	return ok
}

// refreshWithin bounds a waiter's sleep so that its next attempt renews its
// place in Redis (a FairLock queue, a writer's claim) well before the waiter
// timeout evicts it, whatever the holder's lease.
func (c *Client) refreshWithin(retryIn time.Duration) time.Duration {
	refresh := c.opts.waiterTimeout / 3
	if retryIn < 0 || retryIn > refresh {
		return refresh
	}
	return retryIn
}

// keepPresence makes the subscriber keep a connection of this Client open
// from its first hold on (see subscriber.keepAlive), so that a Redis restart
// breaks it and every hold is checked at once, even while no other
// connection is in use, and writes the Client's name record (names.go).
// One atomic load per acquisition after the first.
func (c *Client) keepPresence() {
	if !c.presence.Load() && c.presence.CompareAndSwap(false, true) {
		c.subs.keepAlive()
		c.goBackground(c.recordName)
	}
}
