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
// # Kinds
//
// Every process that uses the same name on the same Redis shares the lock:
//
//   - Lock: a reentrant, exclusive lock.
//   - FairLock: a Lock granted in request order across processes.
//   - RWLock: its ReadLock is shared, its WriteLock exclusive; writers first.
//   - MultiLock: several Locks, of one Client or several, taken all or none.
//   - RedLock: the Redlock algorithm, a majority of independent masters.
//   - Semaphore: a counting semaphore, FIFO; its permits are holds.
//   - CountDownLatch: Wait returns once CountDowns take TrySetCount's n to 0.
//
// Kinds of one name are different locks. The values are cheap and safe for
// concurrent use; an invalid name gives one whose methods all fail with
// ErrInvalidArgument.
//
// # Owners and hold contexts
//
// A successful Lock returns a hold context that carries its owner: a call
// made with it, or a context derived from it, is the same owner and
// re-enters instead of blocking. A context without an owner is a new owner. Goroutines that share a hold context
// share its holds: give forked goroutines their own owner with NewOwner.
// WithOwner sets an explicit owner id, to resume a hold after a restart.
// Each Semaphore Acquire is a hold of its own, never a re-entry.
//
// The hold context is the holder's signal: it is cancelled when the hold is
// released (cause ErrUnlocked), lost (ErrLockLost) or ended by Close
// (ErrClientClosed); check context.Cause. It is also cancelled with its
// parent, which does not release the lock: Unlock does, or Do returning. Do
// is the scoped form that cannot leak a hold. Unlock(hctx) ends exactly
// hctx's hold; an Unlock of a hold that already ended returns ErrNotHeld and
// changes nothing. A re-entry stays held until it is unlocked itself, even
// when its outer hold is unlocked first.
//
// # Leases
//
// A hold taken without a lease time has the Client's watchdog lease (30 s,
// WithWatchdogLease), renewed every third of it. A hold whose renewal finds
// it gone, or whose renewals fail until its lease runs out, ends at once
// with ErrLockLost; so do the holds Redis forgot, checked when the Client
// sees Redis restart or fail over. A hold taken with a lease time (TryLock's
// lease) expires by itself. A dead process holds its locks for their lease.
//
// # Failure and cancellation
//
// The caller's deadline is the bound. Lock, TryLock, Acquire, TryAcquire,
// Wait and Do return by their context's deadline or cancellation (the Try
// forms also by the end of their wait), plus a small slack (scheduling, and
// at most 50 ms for a waiter leaving a queue), whatever Redis does: hung,
// refusing connections, slow or half-open. A failed acquire wraps
// ErrNotObtained; with context.Cause(ctx) when the context ended, and with
// ErrUnavailable when Redis was the reason. A request that fails at once (a
// refused connection) returns at once. On failure Lock returns its parent
// context and nothing is left held: what a request cut short does in Redis
// is undone once it returns, and the owner's next call on that lock waits
// for that. A TryLock with wait 0 and no deadline on its context is bounded
// by go-redis's own timeouts; so is a Lock whose context never ends (its
// first attempt's failure is returned). Script calls of one Client share
// round trips; one without a deadline waits at most go-redis's PoolTimeout
// for its send, as for a connection, then fails with ErrUnavailable.
//
// Unlock and Release work with a cancelled context and return within the
// unlock timeout (WithUnlockTimeout, default 1 s). A release Redis did not
// confirm returns an error wrapping ErrNotConfirmed and ErrUnavailable: the
// hold has ended for the caller, is no longer renewed, and the release is
// retried in the background until it is confirmed or the lease runs out.
// Every other call (the queries, SetPermits, the latch's calls, Inspect,
// ListLocks, ForceUnlock, ForceRelease) returns when its context ends, with
// an error wrapping context.Cause(ctx) and ErrUnavailable if Redis has not
// answered; a change cut short may still apply. A mutating request that
// go-redis resends after losing its reply answers as its first run did.
// Invalid input (a nil Client included) returns ErrInvalidArgument before
// anything is sent.
//
// # Close
//
// Close is a graceful shutdown. It releases every hold of the Client in
// Redis, bounded together by the unlock timeout, so that waiters elsewhere
// are served at once; their contexts are cancelled with ErrClientClosed and
// a later Unlock or Release of them returns nil. A hold whose release Redis
// does not confirm in that time is left to its lease. Waiters and later
// acquires fail with ErrClientClosed; Unlock, Release and the queries still
// work.
//
// # Limits and fencing tokens
//
// A release hands the lock to the first queued waiter whose process
// listens: one frozen (not dead) then keeps it for its lease, as a frozen
// holder would; so does a dead one with classic pub/sub on a Cluster
// (WithShardedPubSub(false)). Redis replicates asynchronously: a failover
// can lose a hold (WithReplicas narrows the window). A final Unlock resent
// by go-redis after the unlock latch (WithUnlockLatch) or after 64 later
// final releases of the lock reports ErrLockLost. RedLock's safety rests on
// timing (see RedLock). Against all of these, and a holder paused past its
// lease, use Token: a number strictly greater than every earlier
// acquisition's of that lock name, for the resource to reject writes that
// carry a smaller one than it has seen. Tokens keep increasing across
// restarts and failovers under the clock assumption stated on Lock.Token.
//
// # Observing and inspecting
//
// WithObserver sets hooks for metrics and traces (extra/relockotel). The
// Client logs one Warn line per loss and per subscriber outage (WithLogger).
// Client.Inspect and Client.ListLocks read the state in Redis for operators
// (types in the sub-package inspect), which docs/internals.md describes.
package relock
