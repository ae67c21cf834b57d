// Package relock provides distributed, reentrant locks on Redis, in the
// spirit of Java's Redisson, built on go-redis v9: Lock, FairLock, RWLock,
// MultiLock and RedLock, with fencing tokens; and beyond locks a Semaphore,
// whose permits are holds, and a CountDownLatch.
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
// Redisson identifies a holder as "<client uuid>:<thread id>"; relock as
// "<client id>:<n>", the client id being a UUID's randomness in 22
// base64url characters (see Client.ID: it is written several times per
// Lock+Unlock and in every latch slot). Go has no
// thread ids, so relock carries the owner in the context: the context a
// successful Lock returns carries it, and every call made with that context,
// or one derived from it, is the same owner and re-enters instead of
// blocking. A context without an owner is a new owner. The returned context
// is also the holder's signal: it is cancelled when the hold is released
// (cause ErrUnlocked) or lost (cause ErrLockLost), so work done under the
// lock can stop the moment the lock is gone. Each hold context is its own
// re-entry: Unlock(c) ends exactly c's hold and cancels exactly c; an Unlock
// of a context whose hold already ended returns ErrNotHeld and changes
// nothing. A hold context is also cancelled when its parent is — that does
// not release the lock; Unlock (or Do returning) does. Goroutines that share
// a hold context share its holds: give forked goroutines their own owner
// with NewOwner. WithOwner sets an explicit owner id, to resume a hold after
// a restart. Do is the scoped form that cannot leak a hold.
//
// # Failure and cancellation
//
// The caller's deadline is the bound. Lock and Do return by their context's
// deadline or cancellation, TryLock also by the end of its wait, plus a
// small slack (scheduling, and at most 50 ms for a waiter's leaving a queue
// while Redis answers) — whatever Redis does: hung, refusing connections,
// slow, or on a half-open connection. The failure wraps ErrNotObtained, and
// context.Cause(ctx) when the context ended; it also wraps ErrUnavailable
// when Redis was the reason (the request was in flight, or failing, when the
// bound came). A request that fails at once (a refused connection) returns
// ErrUnavailable at once. Lock returns its parent context on failure, and
// nothing is left held: scripts run detached from the caller's context — a
// request cut short may still run in Redis — so a request still in flight
// when the caller returns is reconciled in the background once it returns:
// a grant it obtained is released, a waiter it queued leaves the queue. The
// reconciliation keeps the owner's per-lock semaphore until then, so the
// owner's next call on that lock waits behind it (bounded by its own
// deadline) instead of overtaking it, and no clean-up races the request it
// cleans up after. A TryLock with wait 0 and no deadline on its context is
// bounded by go-redis's own timeouts; so is a Lock whose context never ends
// (its first attempt's failure is returned).
//
// Unlock returns within the Client's unlock timeout (WithUnlockTimeout,
// default 1 s), however long Redis hangs. A release Redis did not confirm
// returns an error wrapping ErrNotConfirmed and ErrUnavailable: the hold has
// ended for the caller (its context is cancelled with ErrUnlocked), is no
// longer renewed, and the release is retried in the background — after the
// request in flight has returned — until confirmed or until the lease runs
// out. Unlock works with a cancelled context for the same reason.
//
// How Unlock is bounded depends on the go-redis client. By default go-redis
// ignores a context's deadline, so Unlock runs its release on a goroutine of
// relock's own and waits for it at most the unlock timeout. A go-redis client
// made with ContextTimeoutEnabled (a *redis.Client, failover client,
// *redis.ClusterClient or *redis.Ring; a wrapper of one is not recognised)
// bounds the pool wait, dial, write and read by the context's deadline
// itself: Unlock then runs the release on the caller's goroutine, under a
// deadline of the unlock timeout, which saves the goroutine hand-off — about
// a third of an uncontended Lock+Unlock on 2 cores
// (BenchmarkUncontendedParts: 91-95 µs/op against 59-61 inline). A release
// cut short there is handled as one that overran the bound: ErrNotConfirmed,
// and the same request (its replay is recognised) is retried in the
// background; the owner's per-lock semaphore is kept until that retry is
// done, so its next call on that lock waits behind it. A RedLock's release
// stays on goroutines (its masters' Clients and node timeouts). Lock keeps
// its detached request either way: an acquire cut short by go-redis may
// still run in Redis and leave a hold nobody knows of, which only a request
// that is reconciled once it returns can undo. Inspect,
// ListLocks and ForceUnlock return when their context ends. Invalid input
// (a nil Client included) returns ErrInvalidArgument before anything is
// sent.
//
// Unlocking an outer hold before a re-entry made with its context leaves
// the re-entry held: its context stays live (it still ends with the caller's
// context, other locks' holds and a loss), Redis keeps the owner's count,
// and HoldCount says so, until the re-entry is released (see reentry.go).
//
// # Replays and stale replies
//
// A hold is a generation, named by the op id of the acquire that started it.
// Every later request for it — re-entry, release, renewal, a RedLock round's
// undo — carries that generation and every mutating request its own op id;
// a script refuses to act on another generation and recognises its own
// replay (go-redis resends a request whose reply was lost) by the op id, so
// a late release, a stale renewal or a replay can never change a newer hold.
// A final release records its op id in the lock's tail key (WithUnlockLatch)
// so that its replay reports success. The tail is one hash per lock, not a key
// per release, so the keys a lock leaves do not grow with its release rate:
// it keeps the last token and the op ids of the last 64 final releases, and
// expires the unlock latch after the last of them (see release_common.lua).
// A replay that comes after 64 later final releases of the same lock reports
// the hold lost, as one after the latch's time does. When the Client sees Redis restart or fail
// over (a dropped connection, a LOADING or READONLY reply) it checks every
// hold at once and cancels the holders whose locks Redis forgot.
//
// # Waiting
//
// A blocked Lock queues in Redis — in the lock hash itself, field ~q — and
// sleeps on its Client's channel for that lock (<hash>:w:<client id>)
// through the Client's one shared subscriber connection (one per node on a
// Cluster, with sharded pub/sub where the servers offer it), never polling. The final release hands
// the lock over, in the same script, to the first queued waiter whose Client
// still listens — PUBLISH counts the receivers, so a waiter whose process
// died is skipped — and the grant ("<waiter id> <token>") ends that
// waiter's wait with no further round trip: one release wakes one waiter in
// one process, whatever the number of processes, and nothing is published
// when nobody waits. A grant is a hint, not a hold: the waiter takes it as
// it is only when it provably belongs to its current place in the queue —
// its id (new for each wait) has stayed queued since the attempt that first
// queued it, as each busy reply says, so the grant can only be the one that
// took it out after its last attempt, whose hold runs a lease from that
// attempt — and within a third of the lease of that attempt. Any other (the
// id was queued again after a grant whose hold ran out, an attempt failed,
// WithReplicas is set) is claimed by an attempt at once, which replays the
// waiter's op id: a late grant then finds the new holder and the waiter
// waits on. With WithReplicas the claim carries the WAIT, and writes (its
// PEXPIRE) so that the WAIT covers the hand-over's writes. A waiter that
// gives up leaves the queue, and releases a grant that crossed its leaving
// (lock_abandon.lua); a grant that reaches a Client for an id of its own
// that no longer waits (Redis came back with an older queue) is released at
// once by the same script, unless the Client holds that generation (a
// duplicate of a grant it claimed). A re-subscription after a reconnect
// makes every waiter re-check, and no sleep outlasts the holder's remaining
// lease: a hand-over to a shorter lease than the freed hold's tells every
// Client with a waiter left in the queue to re-check ("all" on its
// channel), since the queue, in a Lock's hash, ends with that shorter hold
// and nothing is published then; an RWLock's waiting readers are told too
// (they slept on the freed write hold's lease as well); a MultiLock waiting
// on a part re-checks on "handed" for the same reason. A grant whose reply
// reaches the Client after its lease has run out (counted from when the
// request was sent: replies slower than the lease) is no hold: Lock never
// returns it, tries again at once (a waiter's retry is a claim), and frees
// it in the background if the wait ends. Limits: a waiter whose process is frozen (not
// dead) when it is granted keeps the lock for its lease, as a frozen holder
// would; with classic pub/sub on a Cluster (WithShardedPubSub(false)),
// PUBLISH counts one node's receivers only, so the first queued waiter is
// granted listening or not, and a dead one's grant lasts its lease.
// FairLock is the same mechanism with its queue in a key of its own
// (<hash>:q), which outlives a hold whose lease runs out, so that an attempt
// finding the lock free hands it to the first in line, never to a newcomer;
// its hash's ~q only marks that the queue key holds waiters, so that an
// uncontended release does not read it.
// A waiter queues only once its Client listens on the channel (the attempt
// after the subscription's confirmation): a hand-over skips a Client that
// does not, and must not skip a live waiter still subscribing.
// An RWLock's waiting writers queue and are handed the write hold the same
// way (field ~q of its hash, channel <hash>:w:<client id>); each claim,
// which makes new readers wait, lapses within the waiter timeout unless
// renewed, so a dead writer holds readers up at most that long. Its waiting
// readers are all woken at once, on the readers' channel, and only when one
// waits.
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
// carrying a smaller token than it has seen. A token is the Redis server's
// clock in µs or one above the last token Redis still knows, so tokens keep
// increasing across restarts without persistence and failovers, under the
// clock assumption stated on Lock.Token. A hand-over's token follows the
// same rule (next_token in acquire_common.lua), never the freed hold's + 1,
// which Redis restored from older state may have handed out already.
//
// # Semaphores and latches
//
// A Semaphore is one more scheme on the same engine, not a second
// mechanism: its acquisitions go through the wait loop, the registry of
// holds, the watchdog's batches, the shared subscriber and the background
// clean-up exactly as a lock's. Decisions, and why:
//
//   - Each Acquire is a hold of its own — a hold record whose id is the
//     acquisition's (semaScheme.holdID), so never a re-entry, even with the
//     context of another Acquire, and Release(hctx) ends exactly that one.
//     Counting permits per owner instead would make Release ambiguous (which
//     of an owner's acquisitions?) and re-entry would let one owner exceed
//     what it asked for without waiting.
//   - No fencing token: several holders share a semaphore at once, so a
//     token orders nothing among them.
//   - The capacity is recorded in Redis while anyone holds or waits, and a
//     different one is refused (ErrInvalidArgument); SetPermits changes it.
//     Nothing outlives the last holder and waiter, capacity included.
//   - Order is FIFO and strict, as x/sync/semaphore's: a head that needs more
//     than is free blocks those behind it, so large requests never starve.
//     The script that frees permits (a release, a waiter leaving, a larger
//     capacity, an attempt that finds expired holds) hands them to the head
//     waiters they suffice for and tells each one alone, with the grant
//     message of the locks ("<waiter id> 0"), so one release wakes only the
//     waiters it serves. Grants are trusted or claimed by the same rules.
//
// A CountDownLatch's Wait uses the same wait loop with an attempt that
// reads the count: it sleeps on the latch's channel through the shared
// subscriber, and the CountDown that opens the latch deletes it and wakes
// every waiter at once.
//
// # Observing
//
// WithObserver sets an Observer: optional funcs the Client calls when a hold
// is acquired, released, renewed or lost (with a LossReason from a fixed
// set), when a Lock starts to wait, is woken and stops waiting, and when a
// subscriber connection comes back. Unset hooks cost a nil check; set ones
// run synchronously and must not block. The hooks of a Lock or Unlock call
// get that call's context. The extra/relockotel module turns them into
// OpenTelemetry metrics and spans. Independently, the Client logs one Warn
// line per loss and per subscriber outage, nothing per acquisition, through
// slog.Default() unless WithLogger says otherwise (WithLogger with a
// slog.DiscardHandler silences it).
//
// # Inspecting
//
// Client.Inspect, Client.ListLocks and Client.Channels read what relock keeps
// in Redis, for operators and tools (the relock command). Their types are in
// the sub-package github.com/relock-go/relock/inspect, so that this package's
// surface is the locks a program takes; a program that only locks never
// imports it. The options state their defaults in their godoc; the defaults
// are not exported as constants, since a program that wants the default
// passes no option.
package relock
