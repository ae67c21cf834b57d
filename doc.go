// Package relock provides distributed, reentrant locks on Redis, in the
// spirit of Java's Redisson, built on go-redis v9: Lock, FairLock, RWLock,
// MultiLock and RedLock, with fencing tokens.
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
// # Ownership
//
// Redisson identifies a holder as "<client uuid>:<thread id>". Go has no
// thread ids, so relock carries the owner in the context: the context a
// successful Lock returns carries it, and every call made with that context,
// or one derived from it, is the same owner and re-enters instead of
// blocking. A context without an owner is a new owner. The returned context
// is also the holder's signal: it is cancelled when the hold is released
// (cause ErrUnlocked) or lost (cause ErrLockLost), so work done under the
// lock can stop the moment the lock is gone. WithOwner sets an explicit owner
// id for the rare hand-over of a hold between processes.
//
// # Failure and cancellation
//
// Lock waits until it acquires or its context ends; TryLock also stops after
// its wait time. Either way the failure wraps ErrNotObtained (and ctx.Err()
// when the context ended), and nothing is left held. Scripts run detached
// from the caller's context — a script cancelled in flight may have run, and
// a hold nobody knows of would leak — bounded by the go-redis client's own
// timeouts. Unlock works with a cancelled context for the same reason.
// Invalid input returns ErrInvalidArgument before anything is sent.
//
// # Replays
//
// go-redis resends a command whose reply was lost. Every acquire and release
// script receives the hold count the Client believes its owner has (the
// Client serialises one owner's operations on one lock), so a replayed
// request is recognised by the count it finds and is not applied twice; a
// final release leaves a short-lived latch key (WithUnlockLatch) so that its
// replay reports success.
//
// # Waiting
//
// A blocked Lock sleeps on the lock's pub/sub channel through the Client's
// one shared subscriber connection (one per node on a Cluster, with sharded
// pub/sub), never polling: an unlock wakes one waiting goroutine per process
// (all of them for read locks), a waiter that gives up passes its wake-up on,
// and a re-subscription after a reconnect makes every waiter re-check. No
// sleep outlasts the holder's remaining lease. Goroutines that arrive while
// others of the process already wait queue behind them without a round trip.
//
// # Leases
//
// A lock taken without a lease time has the Client's watchdog lease (30 s),
// renewed every third of it by the Client's one watchdog goroutine, which
// sends all renewals of a tick in one pipeline. A hold whose renewal finds it
// gone, or whose renewals fail until its lease runs out, ends at once: its
// context is cancelled with ErrLockLost. A lock taken with a lease time
// expires by itself.
//
// # Fencing tokens
//
// A lock cannot protect a resource from a holder that is paused past its
// lease and then writes. Token returns a number, strictly increasing per lock
// name across acquisitions, to pass to the resource, which rejects writes
// carrying a smaller token than it has seen.
package relock
