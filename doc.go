// Package relock provides distributed, reentrant locks on Redis (go-redis
// v9), in the spirit of Java's Redisson: create one Client per process, on
// any go-redis client, and take locks from it (see the package Example).
// The processes that use a name on one Redis share its lock of each kind:
// Lock, FairLock, RWLock, SpinLock, MultiLock, RedLock, Semaphore and
// CountDownLatch. The rules below hold for every kind, each type says what
// it adds, and docs/*.md have the details. The values are safe for
// concurrent use.
//
// # Holds
//
// A successful Lock returns a hold context that carries its owner: a call
// with it, or a context derived from it, re-enters (give forked goroutines
// their own owner with NewOwner). It ends when the hold is released (cause
// ErrUnlocked), lost (ErrLockLost) or closed (ErrClientClosed); its
// parent's end releases nothing. Its Err reads the lease end at each call:
// check it (or Token) right before each write the lock guards. Unlock(hctx)
// ends exactly hctx's hold; an Unlock of a hold that ended returns
// ErrNotHeld and changes nothing. A hold taken without a lease time is renewed every third of the watchdog
// lease (WithWatchdogLease), and ends at once with ErrLockLost when Redis
// no longer has it or renewals fail until it runs out. A hold taken with a
// lease time expires by itself; a dead process holds its locks for their
// lease.
//
// # Failure and cancellation
//
// An acquire (Lock, TryLock, Acquire, TryAcquire, Wait, Do) returns by its
// context's end or its Try wait, plus scheduling and at most 50 ms,
// whatever Redis does. It fails with ErrNotObtained, wrapping
// context.Cause(ctx) when the context ended and ErrUnavailable when Redis
// was the reason, holding nothing: what a request cut short took is
// released before the owner's next call on that lock.
//
// Unlock and Release work with a cancelled context and return within
// WithUnlockTimeout; a release unconfirmed by then returns ErrNotConfirmed
// and ErrUnavailable, ends the hold for the caller, and is retried until
// confirmed, the lease ends or Close. Any other call returns when its
// context ends, wrapping its cause and ErrUnavailable; the error says
// whether a change was sent. Invalid input returns ErrInvalidArgument
// before anything is sent.
//
// # Close
//
// Close ends the holds' contexts (ErrClientClosed; a later Unlock returns
// nil), releases them in Redis so that waiters elsewhere are served at
// once, and returns within the unlock timeout, leaving a release Redis did
// not confirm to its lease. Every acquire under way, and Wait, returns
// ErrNotObtained and ErrClientClosed at once, holding nothing; a later one
// returns ErrClientClosed. Unlock, Release and the queries still work.
//
// # Limits
//
// A frozen waiter handed the lock keeps it for its lease; so does a dead
// one with classic pub/sub on a Cluster. A failover can lose a hold
// (WithReplicas narrows the window). RedLock rests on timing. Against
// these, and a holder paused past its lease, pass Token to the resource.
package relock
