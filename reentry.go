package relock

import (
	"context"
	"sync"
)

// Unlocking an outer hold before a re-entry made with its context
// (h2, _ := l.Lock(h); l.Unlock(h)) leaves the re-entry held — in Redis
// (HoldCount 1), in the Client and in its context, which stays live until
// the re-entry is released or lost. A re-entry's context therefore does not
// inherit the end of the outer hold of the same lock it was derived from;
// it inherits everything else: the caller's cancellation and deadline, the
// end of other locks' holds, and the end of the hold as a whole (a loss
// ends every entry). The alternative — releasing the outer hold releases
// its re-entries too — would make an Unlock release more than the one hold
// it is given.
//
// Mechanically: the re-entry's context derives from a copy of the caller's
// context without its cancellation, and follows the caller's context's end
// — except when that end is the Unlock of an outer entry of this hold: it
// then follows the context that outer entry was derived from instead.

// A follower passes the end of a re-entry's caller's context on to the
// re-entry's parent (cancel), skipping the Unlock of outer entries of the
// same hold.
type follower struct {
	k      *lockCall
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	stop   func() bool // stops the current watch
	closed bool        // the re-entry ended
}

// watch follows ctx's end.
func (f *follower) watch(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.stop = context.AfterFunc(ctx, func() { f.ended(ctx) })
	}
}

// ended is called when the followed ctx has ended: an outer entry's Unlock
// moves the watch to the context that entry was derived from; any other end
// is the re-entry's parent's.
func (f *follower) ended(ctx context.Context) {
	cause := context.Cause(ctx)
	if outer := f.k.unlockedOuter(ctx, cause); outer != nil {
		f.watch(outer)
		return
	}
	f.cancel(cause)
}

// close stops following: the re-entry has ended, and a long-lived caller's
// context must not keep it referenced.
func (f *follower) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.stop != nil {
		f.stop()
	}
}
