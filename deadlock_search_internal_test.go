package relock

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// waitGraph is a wait-for graph as a search reads it: each owner's kind of
// wait ("" : it waits for nothing) and whom it waits for.
type waitGraph map[string]struct {
	kind Kind
	next []string
}

// searchFrom is a search from self whose reads are done: every owner of g
// read. It checks the graph alone, with no Redis.
func searchFrom(g waitGraph, self string) *cycleSearch {
	s := &cycleSearch{nodes: map[string]*waitNode{}, self: waitRecord{owner: self, lock: LockInfo{Kind: g[self].kind}}}
	owners := []string{self}
	for o := range g {
		if o != self {
			owners = append(owners, o)
		}
	}
	slices.Sort(owners[1:])
	for _, o := range owners {
		n := &waitNode{known: true}
		if w := g[o]; w.kind != "" {
			n.rec = &waitRecord{owner: o, lock: LockInfo{Kind: w.kind}}
			n.next, n.any = w.next, w.kind == KindSemaphore
		}
		s.nodes[o], s.order = n, append(s.order, o)
	}
	return s
}

// coreOf is the set of owners self's search would name, sorted.
func coreOf(g waitGraph, self string) (core []string, stuck bool) {
	s := searchFrom(g, self)
	free := s.free()
	for o := range s.core(free) {
		core = append(core, o)
	}
	slices.Sort(core)
	return core, !free[self] && s.nodes[self].rec != nil
}

// Every member of a deadlock names the same members, so the same victim;
// an owner stuck behind a deadlock it is not part of names none, and a
// wait that any free owner may serve is no deadlock.
func TestDeadlockSearchGraphs(t *testing.T) {
	sema, lock := KindSemaphore, KindLock
	for _, tc := range []struct {
		name  string
		g     waitGraph
		cores map[string][]string // by searching owner; absent: none
		stuck []string            // the owners deadlocked
	}{{
		// A knot through a Semaphore: W waits for a permit of a Semaphore held by H1
		// and H2, which both wait for W's Lock.
		name:  "semaphore whose every holder waits for its waiter",
		g:     waitGraph{"W": {sema, []string{"H1", "H2"}}, "H1": {lock, []string{"W"}}, "H2": {lock, []string{"W"}}},
		cores: map[string][]string{"W": {"H1", "H2", "W"}, "H1": {"H1", "H2", "W"}, "H2": {"H1", "H2", "W"}},
		stuck: []string{"W", "H1", "H2"},
	}, {
		name: "semaphore with an idle holder",
		g:    waitGraph{"W": {sema, []string{"H1", "F"}}, "H1": {lock, []string{"W"}}, "F": {}},
	}, {
		// H2's own cycle with X holds W's Semaphore: breaking it frees W,
		// so W and H1 pick no victim of their own.
		name: "semaphore stuck behind another cycle",
		g: waitGraph{"W": {sema, []string{"H1", "H2"}}, "H1": {lock, []string{"W"}},
			"H2": {lock, []string{"X"}}, "X": {lock, []string{"H2"}}},
		cores: map[string][]string{"H2": {"H2", "X"}, "X": {"H2", "X"}},
		stuck: []string{"W", "H1", "H2", "X"},
	}, {
		// A writer waits for two readers, each waiting for the writer's
		// Lock: one set of three, whoever searches.
		name:  "overlapping cycles through a writer",
		g:     waitGraph{"A": {KindWriteLock, []string{"B", "C"}}, "B": {lock, []string{"A"}}, "C": {lock, []string{"A"}}},
		cores: map[string][]string{"A": {"A", "B", "C"}, "B": {"A", "B", "C"}, "C": {"A", "B", "C"}},
		stuck: []string{"A", "B", "C"},
	}, {
		name:  "a wait behind a cycle it is not part of",
		g:     waitGraph{"A": {lock, []string{"B"}}, "B": {lock, []string{"A"}}, "C": {lock, []string{"A"}}},
		cores: map[string][]string{"A": {"A", "B"}, "B": {"A", "B"}},
		stuck: []string{"A", "B", "C"},
	}, {
		// An exclusive wait on a cycle stays deadlocked whatever happens
		// further on: both cycles pick a victim.
		name: "a cycle that also waits on another",
		g: waitGraph{"A": {KindWriteLock, []string{"B", "C"}}, "B": {lock, []string{"A"}},
			"C": {lock, []string{"D"}}, "D": {lock, []string{"C"}}},
		cores: map[string][]string{"A": {"A", "B"}, "B": {"A", "B"}, "C": {"C", "D"}, "D": {"C", "D"}},
		stuck: []string{"A", "B", "C", "D"},
	}, {
		name: "a Semaphore nobody holds",
		g:    waitGraph{"W": {sema, nil}, "H": {lock, []string{"W"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for o := range tc.g {
				core, stuck := coreOf(tc.g, o)
				assert.Equal(t, tc.cores[o], core, "the set %s names", o)
				assert.Equal(t, slices.Contains(tc.stuck, o), stuck, "%s deadlocked", o)
			}
		})
	}
}
