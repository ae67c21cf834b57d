package relock

import (
	"context"
	"slices"
	"strings"
)

// ForceRelease is Lock.ForceUnlock for every permit (any capacity will do).
func (s *Semaphore) ForceRelease(ctx context.Context) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	return s.forceRelease(ctx, ForceGuard{}, semaForceReleaseCall(s, ForceGuard{}), s.endForced)
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
func semaForceReleaseCall(s *Semaphore, g ForceGuard) scriptCall {
	c := s.c
	return scriptCall{script: semaForceReleaseScript, keys: s.semaKeys(s.tail), args: []any{c.args.publish, c.args.blind, c.args.latch, c.newOp(), c.args.clients, g.Owner}}
}
