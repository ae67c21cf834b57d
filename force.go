package relock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A ForceGuard names the one hold ForceUnlockIf or ForceReleaseIf may free.
type ForceGuard struct {
	Owner string // the holder's owner (inspect.Holder.Owner); "" for any
	Token int64  // the hold's fencing token; 0 for any (read holds and permits have none)
}

func (g ForceGuard) String() string {
	switch {
	case g.Token == 0:
		return "owner " + g.Owner
	case g.Owner == "":
		return "token " + strconv.FormatInt(g.Token, 10)
	}
	return "owner " + g.Owner + " at token " + strconv.FormatInt(g.Token, 10)
}

// check reports a guard that names nothing, or what cannot be an owner or
// a token (tokens: whether the lock's holds carry fencing tokens).
func (g ForceGuard) check(tokens bool) error {
	switch {
	case g.Owner == "" && g.Token == 0:
		return fmt.Errorf("%w: a force guard names no owner and no token", ErrInvalidArgument)
	case strings.HasPrefix(g.Owner, "~") || strings.ContainsRune(g.Owner, 0):
		return fmt.Errorf("%w: force guard owner %q starts with '~' or contains NUL", ErrInvalidArgument, g.Owner)
	case g.Token < 0:
		return fmt.Errorf("%w: force guard token %d is negative", ErrInvalidArgument, g.Token)
	case g.Token != 0 && !tokens:
		return fmt.Errorf("%w: a read hold or a Semaphore's carries no fencing token to guard with", ErrInvalidArgument)
	}
	return nil
}

// args are the guard's script arguments: the owner and the token ("" for
// any).
func (g ForceGuard) args() (owner, token string) {
	if g.Token != 0 {
		token = strconv.FormatInt(g.Token, 10)
	}
	return g.Owner, token
}

// ForceUnlockIf is ForceUnlock if g names the hold; else *HolderChangedError,
// or (false, nil) if it is free. An empty g is ErrInvalidArgument.
func (l *Lock) ForceUnlockIf(ctx context.Context, g ForceGuard) (bool, error) {
	return l.forceUnlockIf(ctx, g, true, l.keys.hash, lockForceReleaseCall(l.c, l.keys, g))
}

// ForceUnlockIf is Lock.ForceUnlockIf.
func (l *FairLock) ForceUnlockIf(ctx context.Context, g ForceGuard) (bool, error) {
	return l.forceUnlockIf(ctx, g, true, l.keys.hash, fairForceReleaseCall(l.c, l.keys, g))
}

// ForceUnlockIf is Lock.ForceUnlockIf.
func (l *SpinLock) ForceUnlockIf(ctx context.Context, g ForceGuard) (bool, error) {
	return l.forceUnlockIf(ctx, g, true, l.keys.hash, lockForceReleaseCall(l.c, l.keys, g))
}

// ForceUnlockIf is Lock.ForceUnlockIf for g.Owner's read hold (no Token).
func (r *ReadLock) ForceUnlockIf(ctx context.Context, g ForceGuard) (bool, error) {
	return r.m.forceUnlockIf(ctx, g)
}

// ForceUnlockIf is Lock.ForceUnlockIf for the write hold.
func (w *WriteLock) ForceUnlockIf(ctx context.Context, g ForceGuard) (bool, error) {
	return w.m.forceUnlockIf(ctx, g)
}

func (m rwMode) forceUnlockIf(ctx context.Context, g ForceGuard) (bool, error) {
	return m.l.forceUnlockIf(ctx, g, m.kind == "w", m.holdID(), rwForceReleaseCall(m.l.c, m.l.keys, m.kind, g))
}

// ForceReleaseIf is Lock.ForceUnlockIf for g.Owner's permits (Token 0).
func (s *Semaphore) ForceReleaseIf(ctx context.Context, g ForceGuard) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	if err := g.check(false); err != nil {
		return false, err
	}
	return s.forceRelease(ctx, g, semaForceReleaseCall(s, g), s.endForced)
}

// forceUnlockIf is ForceUnlockIf, tokens saying whether the lock's holds
// carry fencing tokens.
func (l *base) forceUnlockIf(ctx context.Context, g ForceGuard, tokens bool, id string, call scriptCall) (bool, error) {
	if l.err != nil {
		return false, l.err
	}
	if err := g.check(tokens); err != nil {
		return false, err
	}
	return l.forceUnlock(ctx, g, id, call)
}

// refusal is the error of a guarded force release's refusal reply (see
// force_refused in force_common.lua), nil for any other reply; its
// Holders have no names yet (see nameHolders).
func (l *base) refusal(g ForceGuard, reply []string) *HolderChangedError {
	if len(reply) < 2 || reply[0] != "!" {
		return nil
	}
	token, _ := strconv.ParseInt(reply[1], 10, 64)
	holders := make([]Holder, len(reply)-2)
	for i, o := range reply[2:] {
		holders[i].Owner = o
	}
	return &HolderChangedError{Lock: l.ks.name, Expected: g, Holders: holders, Token: token}
}

// join is the refusal of e and other, two masters' of a RedLock: the
// holders of either, once each, at the larger token.
func (e *HolderChangedError) join(other *HolderChangedError) *HolderChangedError {
	if e == nil {
		return other
	}
	for _, h := range other.Holders {
		if !slices.Contains(e.Holders, h) {
			e.Holders = append(e.Holders, h)
		}
	}
	e.Token = max(e.Token, other.Token)
	return e
}

// nameHolders adds their Clients' names to e's Holders (best-effort, see
// namesOf).
func (c *Client) nameHolders(ctx context.Context, e *HolderChangedError) {
	owners := make([]string, len(e.Holders))
	for i, h := range e.Holders {
		owners[i] = h.Owner
	}
	names := c.namesOf(ctx, owners)
	for i := range e.Holders {
		e.Holders[i].ClientName = names[e.Holders[i].Owner]
	}
}

// forcedElsewhere ends the holds of generation gen recorded under id (or,
// for an id ending in '#', a Semaphore's, under an id it starts), which a
// force release removed in Redis and told this Client of on its own
// channel (see force_tell in force_common.lua). A hold already ended, or
// not yet recorded, is left to the watchdog's next check.
func (c *Client) forcedElsewhere(gen, id string) {
	cause := lossCause(LossForceUnlocked, ErrForceUnlocked)
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.m {
		if h.gen == gen && (k.id == id || strings.HasSuffix(id, "#") && strings.HasPrefix(k.id, id)) {
			c.endLocked(h, gen, cause)
		}
	}
}

// forcedPrefix starts the message force_tell sends to a Client whose hold
// a force release removed; the generation follows.
const forcedPrefix = "forced "
