// Package relock provides distributed, reentrant locks on Redis, in the
// spirit of Java's Redisson, built on go-redis v9.
//
// Create one Client per process on any go-redis client (single node,
// Cluster, Sentinel failover) and take locks from it:
//
//	c := relock.New(rdb)
//	defer c.Close()
//	orders := c.Lock("orders")
//	ctx, err := orders.Lock(ctx)
//	if err != nil {
//		return err
//	}
//	defer orders.Unlock(ctx)
//
// The processes that use a name on one Redis share its lock of each kind
// (kinds of one name are different locks): Lock, FairLock, RWLock,
// SpinLock, MultiLock, RedLock, Semaphore and CountDownLatch. The rules
// below hold for every kind; each type says what it adds. The values are
// safe for concurrent use; an invalid name gives a lock whose calls fail
// with ErrInvalidArgument.
//
// # Owners and hold contexts
//
// A successful Lock returns a hold context that carries its owner: a call
// with it, or a context derived from it, re-enters instead of blocking.
// Goroutines that share a hold context share its holds: give forked ones
// their own owner with NewOwner. Each Semaphore Acquire is a hold of its own.
//
// The hold context is cancelled when the hold is released (cause
// ErrUnlocked), lost (ErrLockLost) or ended by Close (ErrClientClosed);
// check context.Cause. Its parent's end does not release the lock: Unlock
// does, or Do returning. Unlock(hctx) ends exactly hctx's hold; an Unlock
// of a hold that ended returns ErrNotHeld and changes nothing. A re-entry
// stays held until it is unlocked itself.
//
// The hold context's Err reads the lease end by the Client's clock at each
// call: once the lease has run out it reports the hold lost (and ends it)
// even if the timer that ends it fires late, as timers do on a loaded
// machine. Check Err (or Token) right before each write the lock guards;
// Done closes at the timer, and so do contexts derived from the hold
// context.
//
// # Leases
//
// A hold taken without a lease time has the watchdog lease (30 s,
// WithWatchdogLease), renewed every third of it. A hold whose renewal finds
// it gone, or whose renewals fail until its lease runs out, or that Redis
// forgot in a restart or failover, ends at once with ErrLockLost. A hold
// taken with a lease time expires by itself. A dead process holds its
// locks for their lease.
//
// # Failure and cancellation
//
// The caller's deadline is the bound. An acquire (Lock, TryLock, Acquire,
// TryAcquire, Wait, Do) returns by its context's end (a Try form also by
// the end of its wait), plus scheduling and at most 50 ms for a waiter
// leaving a queue, whatever Redis does. It fails with ErrNotObtained, also
// wrapping context.Cause(ctx) when the context ended and ErrUnavailable
// when Redis was the reason (no reply, or a refusal that says nothing
// about the lock: OOM, BUSY, READONLY, LOADING, MASTERDOWN, CLUSTERDOWN,
// TRYAGAIN, or ASK and MOVED once go-redis's redirects ran out), holding
// nothing: a request cut short is undone in the background, before the
// owner's next call on that lock. Without a deadline, an acquire returns its first attempt's failure, bounded by
// go-redis's own timeouts; a refused connection fails at once. A waiter
// rides out such a refusal, retrying with backoff until its wait ends, as
// it rides out a network fault.
//
// Unlock and Release work with a cancelled context and return within the
// unlock timeout (WithUnlockTimeout, default 1 s); a release Redis did not
// confirm by then, or refused for Redis's own state, returns
// ErrNotConfirmed and ErrUnavailable, ends the hold for the caller, and is
// retried with backoff until confirmed, the lease ends or Close tries it
// once more. They run the release on the caller's goroutine
// when go-redis itself ends it by then: a client with
// ContextTimeoutEnabled, or one whose WriteTimeout + ReadTimeout is at most
// half the unlock timeout. On the latter, a connection go-redis opens for
// the release (or a Cluster slot map it reloads) whose set-up Redis answers
// slowly can carry the release past the unlock timeout by those round
// trips, each within go-redis's timeouts. Any other call returns when its
// context ends, wrapping context.Cause(ctx) and ErrUnavailable; a change cut
// short may still apply if it was sent (the error says whether). A request
// go-redis resends after losing its reply answers as its first run did.
// Invalid input returns ErrInvalidArgument before anything is sent.
//
// # Close
//
// Close releases every hold of the Client in Redis, so that waiters
// elsewhere are served at once, and returns within the unlock timeout: a
// request still in flight then, a watchdog renewal's included, is
// abandoned, and its reply changes nothing once it comes. The holds'
// contexts end first, with ErrClientClosed and without a loss reported,
// and a later Unlock of them returns nil; a release Redis did not confirm
// leaves its hold to its lease. Every acquire under way (and a latch's
// Wait) returns ErrNotObtained and ErrClientClosed, holding nothing,
// whatever its context: a wait ends at once. Close waits, within the same
// bound, until what the request in flight of an acquire with a context
// that can end, or a TryLock wait, took has been released, so that a
// process that ends right after Close leaves nothing held. An acquire with
// neither (Lock with context.Background) runs its request on its caller's
// goroutine and releases what that request took itself, after Close has
// returned. An acquire begun after Close returns ErrClientClosed alone;
// Unlock, Release and the queries still work.
//
// # Limits and fencing tokens
//
// A release hands the lock to the first queued waiter whose process
// listens: a frozen one keeps it for its lease; so does a dead one with
// classic pub/sub on a Cluster. A failover can lose a hold (WithReplicas
// narrows the window). A final Unlock resent after the unlock latch reports
// ErrLockLost. RedLock rests on timing. Against these, and a holder paused
// past its lease, pass Token to the resource (see Lock.Token).
//
// # Observing
//
// WithObserver sets hooks for metrics and traces (extra/relockotel); the
// Client logs one Warn per loss and per subscriber outage (WithLogger).
// Client.Inspect and ListLocks read the state in Redis for operators.
// docs/internals.md describes the keys and the protocol.
package relock
