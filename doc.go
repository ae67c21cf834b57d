// Package relock provides distributed, reentrant locks on Redis (go-redis
// v9), in the spirit of Java's Redisson (see the package Example). Create
// one Client per process; the processes that use a name on one Redis share
// its lock of each kind: Lock, FairLock, RWLock, SpinLock, MultiLock,
// RedLock, Semaphore and CountDownLatch. The rules below hold for every
// kind; each type says what it adds; docs/*.md have the details. The
// values are safe for concurrent use.
//
// # Holds
//
// A successful Lock returns a hold context carrying its owner: a call with
// it, or a context derived from it, re-enters (give forked goroutines their
// own owner with NewOwner). It ends when the hold is released (cause
// ErrUnlocked), lost (ErrLockLost) or closed (ErrClientClosed); its
// parent's end releases nothing. Its Err reads the lease end at each call:
// check it (or Token) right before each guarded write. Unlock(hctx)
// ends exactly hctx's hold; an Unlock of an ended hold returns ErrNotHeld,
// changing nothing.
//
// A hold without a lease time is renewed every third of WithWatchdogLease
// and ends at once with ErrLockLost when Redis no longer has it or
// renewals fail until it runs out; a hold with a lease time expires by
// itself. Limits: a dead holder keeps its locks for their lease, and so
// does a frozen waiter handed one (or a dead one, with classic pub/sub on a
// Cluster); a failover can lose a hold (WithReplicas narrows the risk);
// RedLock rests on timing. Token fences against these, and against a
// holder paused past its lease: pass it to the resource.
//
// # Failure and cancellation
//
// An acquire (Lock, TryLock, Acquire, TryAcquire, Wait, Do) returns by its
// context's deadline or its Try wait, plus scheduling and at most 50 ms,
// whatever Redis does. It fails with ErrNotObtained, wrapping
// context.Cause(ctx) when the context ended and ErrUnavailable when Redis
// was the reason, holding nothing: what a request cut short took is
// released before the owner's next call on that lock.
// A cancellation without a deadline ends a wait at once and a request in
// flight when Redis answers (one round trip) or go-redis's timeouts end it
// (on a hung Redis, WriteTimeout + ReadTimeout), as with go-redis itself.
//
// Unlock and Release work with a cancelled context and return within
// WithUnlockTimeout; a release unconfirmed by then returns ErrNotConfirmed
// and ErrUnavailable, ends the hold for the caller, and is retried until
// confirmed, the lease ends or Close. Other calls return when their context
// ends, wrapping its cause and ErrUnavailable; a change it sent may still
// apply. Invalid input returns ErrInvalidArgument before
// anything is sent.
//
// # Close
//
// Close returns within the unlock timeout, ending the holds' contexts
// (ErrClientClosed; a later Unlock returns nil) and releasing them in Redis
// for other waiters at once; an unconfirmed one is left to its
// lease. Every acquire under way, and Wait, returns ErrNotObtained and
// ErrClientClosed at once, holding nothing; later ones return
// ErrClientClosed. Unlock, Release and queries work.
package relock
