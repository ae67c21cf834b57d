package relock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors, for errors.Is; docs/errors.md says when each is returned.
var (
	ErrNotObtained        = errors.New("relock: lock not obtained")                                                         // an acquire failed, holding nothing
	ErrNotHeld            = errors.New("relock: lock not held by this owner")                                               // the owner holds no hold; nothing changed
	ErrLockLost           = errors.New("relock: lock lost")                                                                 // a hold ended without Unlock (see LossReason)
	ErrUnlocked           = errors.New("relock: lock released")                                                             // the cause of a hold context after Unlock
	ErrClientClosed       = errors.New("relock: client closed")                                                             // the Client is closed
	ErrNotReplicated      = errors.New("relock: lock write not replicated")                                                 // see WithReplicas
	ErrUnavailable        = errors.New("relock: redis unavailable")                                                         // Redis did not answer, or refused the user
	ErrInvalidArgument    = errors.New("relock: invalid argument")                                                          // found before anything is sent
	ErrNotConfirmed       = errors.New("relock: unlock not confirmed")                                                      // a release unconfirmed in the unlock timeout
	ErrUnsupported        = errors.New("relock: not supported by the server")                                               // the server lacks what an option needs
	ErrDeadlock           = errors.New("relock: deadlock")                                                                  // see WithDeadlockDetection
	ErrForceUnlocked      = fmt.Errorf("%w: force-unlocked", ErrLockLost)                                                   // a force release freed the hold
	ErrHolderChanged      = errors.New("relock: the lock is held by someone else than expected")                            // see HolderChangedError
	ErrUpgrade            = errors.New("relock: the owner holds the read lock; it cannot take the write lock (no upgrade)") // a reader asked to write
	ErrIncompatibleLayout = errors.New("relock: records of a layout this relock does not read")                             // another version's records; nothing changed
	ErrInvalidName        = fmt.Errorf("%w: invalid client name", ErrInvalidArgument)                                       // a bad WithName name
)

// HolderChangedError (ErrHolderChanged): the guard missed; nothing was freed.
type HolderChangedError struct {
	Lock     string     // the lock's name
	Expected ForceGuard // what the caller expected
	Holders  []Holder   // who holds it now (ClientName: "" when unknown)
	Token    int64      // the current hold's fencing token (0: none)
}

func (e *HolderChangedError) Error() string {
	held := make([]string, len(e.Holders))
	for i, h := range e.Holders {
		held[i] = h.text()
	}
	return fmt.Sprintf("%v: lock %q is held by %s at token %d, not %s", ErrHolderChanged, e.Lock,
		strings.Join(held, ", "), e.Token, e.Expected)
}

// Is makes errors.Is(err, ErrHolderChanged) true.
func (e *HolderChangedError) Is(target error) bool { return target == ErrHolderChanged }

// ReleaseError is Do's error when fn succeeded and only the release failed.
type ReleaseError struct{ Err error }

func (e *ReleaseError) Error() string {
	return "relock: fn succeeded, its release failed: " + e.Err.Error()
}

func (e *ReleaseError) Unwrap() error { return e.Err }

// unavailable marks an error by which Redis, not the lock, made a request
// fail as ErrUnavailable, keeping the cause for errors.Is/As: no reply came
// (network, timeout, no connection free in go-redis's pool), or Redis
// refused the request (refusal). Any other error is returned as it is.
func unavailable(err error) error {
	switch {
	case err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled):
		return err
	case outcomeUnknown(err) || errors.Is(err, redis.ErrPoolTimeout):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return refusal(err)
}
