// Package kinds is the part of relock's table of kinds that the relock
// command reads: how each kind of lock is shown, watched and force-released.
// Package relock fills Table from its own table (kinds.go), one entry per
// row, when it is loaded; this package declares only the shape, so that the
// command reads the table without widening relock's exported API.
package kinds

import (
	"context"
	"time"

	"github.com/relock-go/relock/inspect"
)

// Kind is what the relock command knows of one kind of lock that Inspect
// reports.
type Kind struct {
	View inspect.Kind // its kind in inspect's views and in the JSON output
	Type string       // its Go type, as the tables print it: "Lock"
	// Rows are its lines of the inspect and watch table, one per holder and
	// waiter; none when the state has no such lock.
	Rows func(st *inspect.State) []Row
	// Listen is the hash and field that watch sets so that the current
	// holds announce their release ("" when none do).
	Listen func(st *inspect.State) (key, field string)
	// Watched are the channels watch subscribes to ("" entries skipped).
	Watched func(ch inspect.Channels) []string
	// Releases are the force releases that free every hold st shows, one
	// per call; c is the *relock.Client that inspected st.
	Releases func(c any, name string, st *inspect.State) []Release
}

// Row is one line of the inspect table. A zero Expires or Token prints "-".
type Row struct {
	Role, Owner, Holds string
	Name               string // the owner's Client's name ("" : unknown)
	Expires            time.Duration
	Token              int64
	Wait               *inspect.Wait // a holder's: the lock its owner waits for
}

// Release is one force release.
type Release struct {
	Mode    string           // "read" or "write" for an RWLock
	Holders []inspect.Holder // who holds what it frees
	Unit    string           // what a holder's count counts: "hold", "permit"
	Count   int              // a closed latch's count; it has no holders
	// Deletes: it deletes the lock's state instead of freeing holds, which
	// tells its waiters something that did not happen; force-unlock does it
	// only when told (--delete-latch).
	Deletes bool
	// Next says what the queued waiters get ("" when none wait).
	Next string
	Do   func(context.Context) (bool, error)
	// Token is the fencing token of the hold it frees (0: none shown).
	Token int64
	// DoIf is Do guarded (relock's ForceUnlockIf): it frees only the hold
	// of owner ("" : any) at token (0 : any), and refuses with
	// relock.ErrHolderChanged when someone else holds it. nil for a
	// deletion.
	DoIf func(ctx context.Context, owner string, token int64) (bool, error)
}

// Table holds one entry per kind that Inspect reports, in relock's order.
// Package relock sets it once, before any of its callers runs.
var Table []Kind

// Of returns the entry of view, and false for a kind the table lacks.
func Of(view inspect.Kind) (Kind, bool) {
	for _, k := range Table {
		if k.View == view {
			return k, true
		}
	}
	return Kind{}, false
}
