package relock

import (
	"context"
	"slices"
	"strings"
)

// ForceRelease frees every permit of the semaphore, whoever holds it, and
// hands them to the waiters at the head of the queue they serve, as a
// Release does. It reports whether anything was held. The holds it removed
// that this Client has end at once (hold context cancelled with
// ErrLockLost, LossForceUnlocked for the Observer); holds in other
// processes learn it at their next renewal, Release or lease end, as a
// force-unlocked Lock's holder does. The permits it hands on are their
// waiters' and stay. The capacity this Semaphore was made with does not
// matter (any valid one will do). It returns when ctx ends, with an error wrapping
// context.Cause(ctx) and ErrUnavailable, even if Redis has not answered;
// the force-release may still run then.
func (s *Semaphore) ForceRelease(ctx context.Context) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	return s.forceRelease(ctx, semaForceReleaseCall(s), s.endForced)
}

// endForced ends this Client's holds of the semaphore whose generation is
// one of gens (see Client.endForced: a Semaphore registers each Acquire
// under an id of its own).
func (s *Semaphore) endForced(gens []string, cause error) {
	cause = lossCause(LossForceUnlocked, cause)
	r := &s.c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.m {
		if h.gen != "" && strings.HasPrefix(k.id, s.hash+"#") && slices.Contains(gens, h.gen) {
			s.c.endLocked(h, h.gen, cause)
		}
	}
}

var semaForceReleaseScript = newScript("sema_force_release")

// semaForceReleaseCall frees every hold of semaphore s, keeping its answer
// in its tail for a replay.
func semaForceReleaseCall(s *Semaphore) scriptCall {
	c := s.c
	return scriptCall{script: semaForceReleaseScript, keys: s.semaKeys(s.tail), args: []any{c.args.publish, c.args.blind, c.args.latch, c.newOp()}}
}
