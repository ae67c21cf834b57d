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
	Mode    string       `json:"mode,omitempty"` // "read" or "write" for an RWLock
	Holders []jsonHolder `json:"holders"`
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
	do      func(context.Context) (bool, error)
}

func (r release) what() string {
	s := kindName(r.kind)
	if r.mode != "" {
		s += " " + r.mode
	}
	return s
}

func holdersText(hs []inspect.Holder) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		n := strconv.Itoa(h.Count) + " holds"
		if h.Count == 1 {
			n = "1 hold"
		}
		parts[i] = h.Owner + " (" + n + ")"
	}
	return strings.Join(parts, ", ")
}

// forceUnlock releases every hold on every kind of lock called name, after
// asking unless --yes. A holder in another process learns it at its next
// renewal, unlock or lease end: its hold context is cancelled with
// ErrLockLost there.
func (cl *cli) forceUnlock(ctx context.Context, name string) int {
	st, err := cl.c.Inspect(ctx, name)
	if err != nil {
		return cl.fail("inspect", err)
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
			out.Released = append(out.Released, jsonReleased{Kind: string(r.kind), Mode: r.mode, Holders: holders(r.holders)})
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
// lock called name, one per kind (and RWLock mode) that is held.
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
	return todo
}

// confirmed asks on stderr whether to release todo and reports a yes.
func (cl *cli) confirmed(name string, todo []release) bool {
	var held []string
	for _, r := range todo {
		held = append(held, holdersText(r.holders)+" ["+r.what()+"]")
	}
	fmt.Fprintf(cl.stderr, "release lock %s held by %s? [y/N] ", name, strings.Join(held, ", "))
	answer, _ := bufio.NewReader(cl.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true
	}
	return false
}

// reportRelease prints what one force release did (ok: it released a hold).
func (cl *cli) reportRelease(name string, r release, ok bool) {
	if !ok {
		fmt.Fprintf(cl.stdout, "%s %s was no longer held\n", r.what(), name)
		return
	}
	msg := fmt.Sprintf("released %s %s held by %s", r.what(), name, holdersText(r.holders))
	if r.waiters > 0 {
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
