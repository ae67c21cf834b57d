package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

// jsonReleased is one hold force-unlock removed.
type jsonReleased struct {
	Kind    string       `json:"kind"`
	Mode    string       `json:"mode,omitempty"`  // "read" or "write" for an RWLock
	Holders []jsonHolder `json:"holders"`         // count: a Semaphore holder's permits
	Count   int          `json:"count,omitempty"` // a deleted CountDownLatch's count
}

type jsonForce struct {
	Name     string         `json:"name"`
	Released []jsonReleased `json:"released"`
	// Refused: the lock is held by someone else than --owner/--token, or
	// than the holders shown when asked; nothing of that kind was freed.
	Refused *jsonRefused `json:"refused,omitempty"`
}

// jsonRefused is who holds a lock that a guarded force release refused.
type jsonRefused struct {
	Kind    string      `json:"kind"`
	Mode    string      `json:"mode,omitempty"`
	Holders []jsonOwner `json:"holders"`
	Token   int64       `json:"token,omitempty"`
}

// release is one force release of one kind, as its row in the table of
// kinds describes it.
type release struct {
	kinds.Release
	kind inspect.Kind
}

func (r release) what() string {
	s := kindName(r.kind)
	if r.Mode != "" {
		s += " " + r.Mode
	}
	return s
}

// heldText says who holds what r releases: its holders with their counts
// (holds, a Semaphore's permits), or a latch's count.
func (r release) heldText() string {
	if r.Deletes {
		return "count " + strconv.Itoa(r.Count)
	}
	parts := make([]string, len(r.Holders))
	for i, h := range r.Holders {
		n := strconv.Itoa(h.Count) + " " + r.Unit + "s"
		if h.Count == 1 {
			n = "1 " + r.Unit
		}
		if h.Name != "" {
			n = printable(h.Name) + ", " + n
		}
		parts[i] = h.Owner + " (" + n + ")"
	}
	return "held by " + strings.Join(parts, ", ")
}

// forceUnlock releases every hold on every kind of lock called name — a
// Semaphore's permits included — after asking unless --yes. Each release
// frees only the holders it showed (ForceUnlockIf): a hold taken since is
// left alone, and reported. With --owner or --token it frees only the hold
// the operator names, so that a command run twice frees nobody else. A
// holder's context is cancelled with ErrForceUnlocked at once when its
// Client is subscribed, else at its next renewal, unlock or lease end. A
// closed CountDownLatch is refused, releasing nothing, unless
// --delete-latch: opening it would tell its waiters that the work they
// wait for is done.
func (cl *cli) forceUnlock(ctx context.Context, name string) int {
	st, err := cl.c.Inspect(ctx, name)
	if err != nil {
		return cl.fail("inspect", err)
	}
	todo := cl.releasesOf(name, st)
	if cl.guarding() {
		var code int
		if todo, code = cl.guardedReleases(name, todo); code != exitOK {
			return code
		}
	}
	for _, r := range todo {
		if r.Deletes && !cl.deleteLatch {
			fmt.Fprintf(cl.stderr, "relock: %s is a closed %s (%s); force-unlock does not open a latch: pass --delete-latch to delete it; nothing released\n", name, r.what(), r.heldText())
			return exitFail
		}
	}
	out := jsonForce{Name: name, Released: []jsonReleased{}}
	if len(todo) == 0 {
		if cl.json {
			return cl.writeOrFail(out)
		}
		if st.Exists() {
			fmt.Fprintf(cl.stdout, "lock %s is not held (only waiters); nothing released\n", name)
		} else {
			fmt.Fprintf(cl.stdout, "no lock %s\n", name)
		}
		return exitOK
	}
	if !cl.yes && !cl.confirmed(name, todo) {
		fmt.Fprintln(cl.stderr, "not confirmed; nothing released")
		return exitFail
	}
	for _, r := range todo {
		ok, err := cl.release(ctx, r)
		var changed *relock.HolderChangedError
		if errors.As(err, &changed) {
			return cl.refused(name, r, changed, out)
		}
		if err != nil {
			return cl.fail("force unlock "+r.what(), err)
		}
		if ok {
			out.Released = append(out.Released, jsonReleased{Kind: string(r.kind), Mode: r.Mode, Holders: holders(r.Holders), Count: r.Count})
		}
		if !cl.json {
			cl.reportRelease(name, r, ok)
		}
	}
	if cl.json {
		return cl.writeOrFail(out)
	}
	return exitOK
}

func (cl *cli) guarding() bool { return cl.guardOwner != "" || cl.guardToken != 0 }

// guardedReleases keeps of todo the releases that free the hold --owner
// and --token name. None: it reports who holds the lock and returns
// exitFail.
func (cl *cli) guardedReleases(name string, todo []release) ([]release, int) {
	var kept []release
	var held []string
	for _, r := range todo {
		if r.DoIf == nil {
			continue
		}
		held = append(held, r.heldText()+" ["+r.what()+"]")
		if cl.guardToken != 0 && r.Token != cl.guardToken {
			continue
		}
		if cl.guardOwner == "" || slices.ContainsFunc(r.Holders, func(h inspect.Holder) bool { return h.Owner == cl.guardOwner }) {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 && len(held) > 0 {
		fmt.Fprintf(cl.stderr, "relock: lock %s is not held by %s: %s; nothing released\n", name, cl.guardText(), strings.Join(held, ", "))
		return nil, exitFail
	}
	return kept, exitOK
}

func (cl *cli) guardText() string {
	return relock.ForceGuard{Owner: cl.guardOwner, Token: cl.guardToken}.String()
}

// release runs r guarded: by --owner and --token when given, else by the
// holders the command showed (each of them, for a lock with several).
func (cl *cli) release(ctx context.Context, r release) (bool, error) {
	switch {
	case r.DoIf == nil:
		return r.Do(ctx)
	case cl.guarding():
		return r.DoIf(ctx, cl.guardOwner, cl.guardToken)
	case len(r.Holders) == 1:
		return r.DoIf(ctx, r.Holders[0].Owner, r.Token)
	}
	freed := false
	for _, h := range r.Holders {
		ok, err := r.DoIf(ctx, h.Owner, 0)
		if err != nil && !errors.Is(err, relock.ErrHolderChanged) {
			return freed, err
		}
		freed = freed || ok
	}
	return freed, nil
}

// refused reports a release that found the lock held by someone else than
// it expected, and returns exitFail.
func (cl *cli) refused(name string, r release, e *relock.HolderChangedError, out jsonForce) int {
	if cl.json {
		out.Refused = &jsonRefused{Kind: string(r.kind), Mode: r.Mode, Token: e.Token}
		for _, h := range e.Holders {
			out.Refused.Holders = append(out.Refused.Holders, jsonOwner{Owner: h.Owner, Name: h.ClientName})
		}
		if code := cl.writeOrFail(out); code != exitOK {
			return code
		}
		return exitFail
	}
	held := make([]string, len(e.Holders))
	for i, h := range e.Holders {
		held[i] = ownerText(h.Owner, h.ClientName)
	}
	fmt.Fprintf(cl.stderr, "relock: %s %s is held by %s now (token %d), not by %s; not released\n",
		r.what(), name, strings.Join(held, ", "), e.Token, e.Expected)
	return exitFail
}

// releasesOf lists the force releases that free every hold st shows on the
// lock called name, as each kind's row says: one per kind (and RWLock mode)
// that is held, and the deletion of a closed latch.
func (cl *cli) releasesOf(name string, st *inspect.State) []release {
	var todo []release
	for _, k := range kinds.Table {
		for _, r := range k.Releases(cl.c, name, st) {
			todo = append(todo, release{Release: r, kind: k.View})
		}
	}
	return todo
}

// confirmed asks on stderr whether to release todo and reports a yes.
func (cl *cli) confirmed(name string, todo []release) bool {
	var held []string
	for _, r := range todo {
		held = append(held, r.heldText()+" ["+r.what()+"]")
	}
	fmt.Fprintf(cl.stderr, "release lock %s %s? [y/N] ", name, strings.Join(held, ", "))
	answer, _ := bufio.NewReader(cl.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true
	}
	return false
}

// reportRelease prints what one force release did (ok: it released a hold).
func (cl *cli) reportRelease(name string, r release, ok bool) {
	switch {
	case !ok && r.Deletes:
		fmt.Fprintf(cl.stdout, "%s %s was no longer closed\n", r.what(), name)
	case !ok:
		fmt.Fprintf(cl.stdout, "%s %s was no longer held\n", r.what(), name)
	case r.Deletes:
		fmt.Fprintf(cl.stdout, "deleted %s %s (%s)\n", r.what(), name, r.heldText())
	case r.Next != "":
		fmt.Fprintf(cl.stdout, "released %s %s %s; %s\n", r.what(), name, r.heldText(), r.Next)
	default:
		fmt.Fprintf(cl.stdout, "released %s %s %s\n", r.what(), name, r.heldText())
	}
}

func (cl *cli) writeOrFail(v any) int {
	if err := writeJSON(cl.stdout, v); err != nil {
		return cl.fail("write", err)
	}
	return exitOK
}
