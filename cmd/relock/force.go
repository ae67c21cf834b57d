package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

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
		parts[i] = h.Owner + " (" + n + ")"
	}
	return "held by " + strings.Join(parts, ", ")
}

// forceUnlock releases every hold on every kind of lock called name — a
// Semaphore's permits included — after asking unless --yes. A holder in
// another process learns it at its next renewal, unlock or lease end: its
// hold context is cancelled with ErrLockLost there. A closed CountDownLatch
// is refused, releasing nothing, unless --delete-latch: opening it would
// tell its waiters that the work they wait for is done.
func (cl *cli) forceUnlock(ctx context.Context, name string) int {
	st, err := cl.c.Inspect(ctx, name)
	if err != nil {
		return cl.fail("inspect", err)
	}
	todo := cl.releasesOf(name, st)
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
		ok, err := r.Do(ctx)
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
