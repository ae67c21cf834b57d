package relock

import (
	"context"
	"errors"
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

// reentryParent returns the parent of a re-entry's hold context (see above)
// and a func to call with the hold context once it is made, which stops the
// following when the re-entry ends.
func (k *lockCall) reentryParent() (context.Context, func(hctx context.Context)) {
	parent := k.parent
	if parent.Done() == nil {
		return parent, func(context.Context) {}
	}
	detached, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	f := &follower{k: k, cancel: cancel}
	f.watch(parent)
	return detached, func(hctx context.Context) { context.AfterFunc(hctx, f.close) }
}

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

// unlockedOuter returns the context an outer entry of this hold, found in
// ctx, was derived from, when ctx ended because that entry was unlocked;
// else nil.
func (k *lockCall) unlockedOuter(ctx context.Context, cause error) context.Context {
	if !errors.Is(cause, ErrUnlocked) {
		return nil
	}
	for _, p := range k.parts {
		c := p.h.client()
		e := entryFrom(ctx, c, p.h.key.id)
		if e == nil {
			continue
		}
		c.holds.mu.Lock()
		ended, parent := e.ended, e.parent
		c.holds.mu.Unlock()
		if errors.Is(ended, ErrUnlocked) && parent != nil {
			return parent
		}
	}
	return nil
}
