package bench

import (
	"context"
	"errors"
)

// A Locker is one library's blocking, exclusive lock as one process uses it.
// Implementations must be safe for concurrent use: every goroutine of a
// scenario shares the Locker of its "process".
type Locker interface {
	// Lock blocks until the lock called name is held or ctx ends, and returns
	// what releases it. When ctx ends first it returns an error for which
	// ctx.Err() != nil.
	Lock(ctx context.Context, name string) (Unlocker, error)
	// Close releases what the Locker opened (clients, connections).
	Close() error
}

// An Unlocker releases one hold.
type Unlocker interface {
	Unlock(ctx context.Context) error
}

// Reentrant is implemented by Lockers whose holds can be re-entered by the
// same owner; Relock's scenario uses it.
type Reentrant interface {
	// LockAgain re-enters the hold u.
	LockAgain(ctx context.Context, u Unlocker) (Unlocker, error)
}

// Library builds the Lockers of one library.
type Library struct {
	// Name is how the library appears in tables and charts.
	Name string
	// Strategy says how the library waits for a busy lock, for the report.
	Strategy string
	// New connects a new Locker ("process") to the Redis at addr. Every key
	// it writes starts with prefix, so that a run can clean up after itself.
	New func(addr, prefix string, counter *Counter) (Locker, error)
}

// FloorName is the name of the reference library every ratio is taken
// against.
const FloorName = "floor"

// Libraries returns every library the benchmark compares, the floor first.
func Libraries() []Library {
	return []Library{
		floorLibrary(),
		// Redisson's reentrant lock as the seed documents print it: the floor
		// for a reentrant lock, beside the raw floor.
		seedLibrary(),
		relockLibrary(),
		redsyncLibrary(),
		redislockLibrary(),
		rueidislockLibrary(),
		// relock's FairLock: the contended scenarios (3 and 4) show what FIFO
		// hand-off across processes costs and buys in fairness.
		relockFairLibrary(),
		// relock's Lock on go-redis's default client, beside "relock".
		relockDefaultLibrary(),
	}
}

// errClosed is returned by an Unlocker whose hold the library reports as
// already gone.
var errClosed = errors.New("bench: lock was not held at unlock")
