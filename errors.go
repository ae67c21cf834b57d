package relock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors. Every error the package returns wraps one of these (or a
// Redis/network error), so callers test with errors.Is, never by message.
var (
	// ErrNotObtained: the lock could not be acquired before the wait time or the
	// context ended. When the context ended, the error also wraps
	// context.Cause(ctx) (ctx.Err() unless a cause was given).
	ErrNotObtained = errors.New("relock: lock not obtained")

	// ErrNotHeld: the caller's context does not hold the lock (it never locked
	// it, or it called Unlock once more than Lock). Nothing was changed.
	ErrNotHeld = errors.New("relock: lock not held by this owner")

	// ErrLockLost: a hold ended without Unlock: its lease expired, the key was
	// deleted or force-unlocked, or renewal failed until the lease ran out. It is
	// the context.Cause of a lost hold's context, and Unlock returns it when the
	// hold was already gone.
	ErrLockLost = errors.New("relock: lock lost")

	// ErrUnlocked is the context.Cause of a hold's context after its Unlock.
	ErrUnlocked = errors.New("relock: lock released")

	// ErrClientClosed: the Client was closed. It is also the context.Cause of
	// every hold that was still open when Close ran.
	ErrClientClosed = errors.New("relock: client closed")

	// ErrNotReplicated: with WithReplicas, the write that granted a hold did
	// not reach enough replicas in time, or the server rejected WAIT. The
	// hold was released again; the error also wraps ErrNotObtained.
	ErrNotReplicated = errors.New("relock: lock write not replicated")

	// ErrUnavailable: Redis could not be reached (a network error, a timeout,
	// no reply), or it refused the Client's user: no password or a wrong one
	// (NOAUTH, WRONGPASS), an ACL that forbids a command relock needs
	// (NOPERM, or a script's refused command); the message then says which,
	// and the server's reply is kept for errors.As. It wraps the network
	// error. After a network error or a timeout, whether the request ran is
	// unknown; the Client cleans up after it (see Lock and Unlock).
	ErrUnavailable = errors.New("relock: redis unavailable")

	// ErrInvalidArgument: a bad name, duration, option or client (a nil
	// *Client included). It is returned before anything is sent to Redis.
	ErrInvalidArgument = errors.New("relock: invalid argument")

	// ErrNotConfirmed: Redis did not confirm an Unlock within the Client's unlock
	// timeout (WithUnlockTimeout) or answered it with a network error. The hold
	// ended for the caller (its context is cancelled with ErrUnlocked) and is no
	// longer renewed; the release goes on in the background until it is
	// confirmed or the lease runs out. It comes with ErrUnavailable.
	ErrNotConfirmed = errors.New("relock: unlock not confirmed")

	// ErrUnsupported: the server lacks something an option requires and
	// nothing stands in for it (WithShardedPubSub(true) on a server without
	// SPUBLISH: Redis before 7.0, or an ACL without +spublish). Every call
	// on the Client returns it, from the first on; the error names what is
	// missing and wraps the server's reply.
	ErrUnsupported = errors.New("relock: not supported by the server")

	// ErrDeadlock: the waiter was chosen to break a deadlock: its owner
	// waited for a lock whose holders wait, in a cycle, for what it holds
	// (see WithDeadlockDetection). It comes with ErrNotObtained; the message
	// names the cycle's owners and locks. The caller is expected to release
	// what its owner holds (and may retry later), which lets the others of
	// the cycle proceed.
	ErrDeadlock = errors.New("relock: deadlock")
)

// ReleaseError is what Do returns when fn returned nil and the release that
// followed failed: fn's work is done, and only the release (Unlock or
// Release) went wrong. Err is the release's error: ErrLockLost when the hold
// was gone before fn returned (fn then ran without the lock for a while),
// ErrNotConfirmed when Redis did not confirm the release in time. A caller
// that must not repeat fn's work tests for it with errors.As:
//
//	var rel *relock.ReleaseError
//	if errors.As(err, &rel) { /* fn succeeded; the release did not */ }
//
// When fn itself fails, Do returns fn's error joined (errors.Join) with the
// release's, never a ReleaseError, so errors.As reports true exactly when fn
// succeeded.
type ReleaseError struct{ Err error }

func (e *ReleaseError) Error() string {
	return "relock: fn succeeded, its release failed: " + e.Err.Error()
}

func (e *ReleaseError) Unwrap() error { return e.Err }

// unavailable marks an error that came without a reply from Redis (network,
// timeout, no connection free in go-redis's pool) as ErrUnavailable, keeping
// the cause for errors.Is/As.
func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) ||
		!outcomeUnknown(err) && !errors.Is(err, redis.ErrPoolTimeout) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
