package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/relock-go/relock/inspect"
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

// release is one kind of hold force-unlock may remove.
type release struct {
	kind    inspect.Kind
	mode    string
	holders []inspect.Holder
	waiters int
	count   int // a CountDownLatch's count; it has no holders
	do      func(context.Context) (bool, error)
}

func (r release) what() string {
	s := kindName(r.kind)
	if r.mode != "" {
		s += " " + r.mode
	}
	return s
}

// heldText says who holds what r releases: its holders with their hold
// counts (a Semaphore's: permits), or a latch's count.
func (r release) heldText() string {
	if r.kind == inspect.KindCountDownLatch {
		return "count " + strconv.Itoa(r.count)
	}
	unit := "hold"
	if r.kind == inspect.KindSemaphore {
		unit = "permit"
	}
	parts := make([]string, len(r.holders))
	for i, h := range r.holders {
		n := strconv.Itoa(h.Count) + " " + unit + "s"
		if h.Count == 1 {
			n = "1 " + unit
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
	if l := st.CountDownLatch; l != nil && !cl.deleteLatch {
		fmt.Fprintf(cl.stderr, "relock: %s is a closed CountDownLatch (count %d); force-unlock does not open a latch: pass --delete-latch to delete it; nothing released\n", name, l.Count)
		return exitFail
	}
	todo := cl.releasesOf(name, st)
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
		ok, err := r.do(ctx)
		if err != nil {
			return cl.fail("force unlock "+r.what(), err)
		}
		if ok {
			out.Released = append(out.Released, jsonReleased{Kind: string(r.kind), Mode: r.mode, Holders: holders(r.holders), Count: r.count})
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
// lock called name, one per kind (and RWLock mode) that is held, and the
// deletion of a closed latch (forceUnlock has checked --delete-latch).
func (cl *cli) releasesOf(name string, st *inspect.State) []release {
	var todo []release
	if l := st.Lock; l != nil && len(l.Holders) > 0 {
		todo = append(todo, release{kind: inspect.KindLock, holders: l.Holders, waiters: len(l.Queued), do: cl.c.Lock(name).ForceUnlock})
	}
	if f := st.FairLock; f != nil && len(f.Holders) > 0 {
		todo = append(todo, release{kind: inspect.KindFairLock, holders: f.Holders, waiters: len(f.Waiters), do: cl.c.FairLock(name).ForceUnlock})
	}
	if rw := st.RWLock; rw != nil {
		if rw.Writer != nil {
			todo = append(todo, release{kind: inspect.KindRWLock, mode: "write", holders: []inspect.Holder{*rw.Writer}, do: cl.c.RWLock(name).WriteLock().ForceUnlock})
		}
		if len(rw.Readers) > 0 {
			todo = append(todo, release{kind: inspect.KindRWLock, mode: "read", holders: rw.Readers, do: cl.c.RWLock(name).ReadLock().ForceUnlock})
		}
	}
	if sm := st.Semaphore; sm != nil && len(sm.Holders) > 0 {
		// The capacity plays no part in a force release; Redis's is passed
		// so that the Semaphore is valid.
		todo = append(todo, release{kind: inspect.KindSemaphore, holders: sm.Holders, waiters: len(sm.Waiters), do: cl.c.Semaphore(name, max(sm.Permits, 1)).ForceRelease})
	}
	if l := st.CountDownLatch; l != nil {
		todo = append(todo, release{kind: inspect.KindCountDownLatch, count: l.Count, do: cl.c.CountDownLatch(name).Delete})
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
	latch := r.kind == inspect.KindCountDownLatch
	switch {
	case !ok && latch:
		fmt.Fprintf(cl.stdout, "%s %s was no longer closed\n", r.what(), name)
		return
	case !ok:
		fmt.Fprintf(cl.stdout, "%s %s was no longer held\n", r.what(), name)
		return
	case latch:
		fmt.Fprintf(cl.stdout, "deleted %s %s (%s)\n", r.what(), name, r.heldText())
		return
	}
	msg := fmt.Sprintf("released %s %s %s", r.what(), name, r.heldText())
	switch {
	case r.waiters == 1 && r.kind == inspect.KindSemaphore:
		msg += "; 1 queued waiter may take the permits"
	case r.waiters > 0 && r.kind == inspect.KindSemaphore:
		msg += fmt.Sprintf("; %d queued waiters may take the permits, in their order", r.waiters)
	case r.waiters > 0:
		msg += fmt.Sprintf("; woke the first of %d queued waiters", r.waiters)
	}
	fmt.Fprintln(cl.stdout, msg)
}

func (cl *cli) writeOrFail(v any) int {
	if err := writeJSON(cl.stdout, v); err != nil {
		return cl.fail("write", err)
	}
	return exitOK
}
