package relock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/inspect"
)

// The search (a cycleSearch) reads the wait-for graph around one waiter
// and decides whether the waiter belongs to a deadlock that its members
// must break, and which member gives up.
//
// The graph. An owner waits when its record is live and it does not hold
// what the record names (holdsWaited, inspect's rule: a wait that was
// granted and whose record is on its way out is no wait). A waiting owner
// points to the owners its wait waits for (waitedFor). An exclusive wait
// (Lock, FairLock, RWLock read or write) needs every one of them to
// release; a Semaphore wait needs any one of them to, since any release
// may free the permits it asks for. So an owner is free (it may still
// move) when it does not wait, when it waits exclusively and every owner
// it waits for is free, or when it waits for a Semaphore and one of its
// holders is free (or nobody holds it); every other owner met is
// deadlocked.
//
// The set a victim is drawn from must be one every member computes alike,
// with no word between them: the deadlocked owners that the waiter reaches
// and that reach it (its strongly connected component among the
// deadlocked), cut down to those that stay deadlocked once every owner
// outside the set counts as free, and so on until nothing changes. A set
// stuck only because of a deadlock further on (a Semaphore waiter one of
// whose holders waits in another cycle) is left to that one's members,
// whose breaking frees it. Any two members of the final set reach the same
// owners, so each computes the same set, and the same victim from it.

// errSearchBound ends a pass that reached deadlockMaxReads reads or
// deadlockMaxOwners waiting owners: it finds no cycle.
var errSearchBound = errors.New("relock: deadlock search bound reached")

// A waitNode is an owner the search met.
type waitNode struct {
	known bool        // its record (and the state of what it names) was read
	rec   *waitRecord // its wait; nil when it does not wait
	next  []string    // the owners its wait waits for, itself never among them
	any   bool        // a Semaphore wait: any one of next may free it
}

// freedBy reports whether n may move once the owners free reports move.
func (n *waitNode) freedBy(free func(string) bool) bool {
	switch {
	case n.rec == nil:
		return true
	case n.any:
		return len(n.next) == 0 || slices.ContainsFunc(n.next, free)
	}
	return !slices.ContainsFunc(n.next, func(o string) bool { return !free(o) })
}

// A cycleSearch is one pass over the graph around self, each owner's
// record and each lock's state read at most once.
type cycleSearch struct {
	c       *Client
	ctx     context.Context
	self    waitRecord
	reads   int
	waiting int // waiting owners met
	nodes   map[string]*waitNode
	order   []string // owners in the order met: self first
	states  map[LockInfo]*inspect.State
}

func newCycleSearch(c *Client, ctx context.Context, self waitRecord) *cycleSearch {
	return &cycleSearch{c: c, ctx: ctx, self: self, nodes: map[string]*waitNode{}, states: map[LockInfo]*inspect.State{}}
}

// run returns the deadlock self's wait must help break, self first and
// each member once (nil: none), and whether self is deadlocked at all
// (stuck), which a deadlock further on can make it without a cycle of its
// own to break.
func (s *cycleSearch) run() (members []waitRecord, stuck bool, err error) {
	free, err := s.explore()
	if errors.Is(err, errSearchBound) {
		return nil, false, nil
	}
	if err != nil || free[s.self.owner] {
		return nil, false, err
	}
	core := s.core(free)
	for _, o := range s.order {
		if core[o] {
			members = append(members, *s.nodes[o].rec)
		}
	}
	return members, true, nil
}

// explore reads the owners that can matter to self, breadth first, until
// every one is read or self is found free, and returns the owners found
// free. An owner matters while self reaches it through owners that wait
// and are not (yet) found free: the owners behind a free one change
// nothing, so a Semaphore waiter with one idle holder costs two reads.
func (s *cycleSearch) explore() (map[string]bool, error) {
	s.meet(s.self.owner)
	for {
		free := s.free()
		if free[s.self.owner] {
			return free, nil
		}
		owner, ok := s.unread(free)
		if !ok {
			return free, nil
		}
		if err := s.expand(owner); err != nil {
			return nil, err
		}
		for _, o := range s.nodes[owner].next {
			s.meet(o)
		}
	}
}

// meet adds owner to the graph, unread.
func (s *cycleSearch) meet(owner string) {
	if _, ok := s.nodes[owner]; !ok {
		s.nodes[owner] = &waitNode{}
		s.order = append(s.order, owner)
	}
}

// unread returns the first owner met that matters to self and is not read.
func (s *cycleSearch) unread(free map[string]bool) (string, bool) {
	matters := map[string]bool{s.self.owner: true}
	queue := []string{s.self.owner}
	for len(queue) > 0 {
		o := queue[0]
		queue = queue[1:]
		n := s.nodes[o]
		if !n.known {
			return o, true
		}
		if n.rec == nil || free[o] {
			continue
		}
		for _, x := range n.next {
			if !matters[x] {
				matters[x] = true
				queue = append(queue, x)
			}
		}
	}
	return "", false
}

// expand reads owner's record (self's is known) and the state of the lock
// it names, and with them whether and for whom the owner waits.
func (s *cycleSearch) expand(owner string) error {
	n := s.nodes[owner]
	n.known = true
	rec := &s.self
	if owner != s.self.owner {
		r, err := s.recordOf(owner)
		if r == nil || err != nil {
			return err
		}
		rec = r
	}
	st, err := s.stateOf(rec.lock)
	if err != nil {
		return err
	}
	next := waitedFor(st, rec.lock.Kind)
	if holdsWaited(st, *rec) || slices.Contains(next, owner) {
		// It holds what it waits for: its wait was granted and its record
		// goes once its wait loop has returned (or its lease ends, when
		// that delete is lost). A Semaphore owner asking for more permits
		// than it holds, and an owner that would wait for itself, are taken
		// as not waiting either.
		return nil
	}
	if s.waiting++; s.waiting > deadlockMaxOwners {
		return errSearchBound
	}
	n.rec, n.next, n.any = rec, next, rec.lock.Kind == KindSemaphore
	return nil
}

// free returns the owners read that may still move (see the top of the
// file), the unread ones taken as deadlocked: a least fixed point.
func (s *cycleSearch) free() map[string]bool {
	free := map[string]bool{}
	isFree := func(o string) bool { return free[o] }
	for changed := true; changed; {
		changed = false
		for _, o := range s.order {
			if n := s.nodes[o]; !free[o] && n.known && n.freedBy(isFree) {
				free[o], changed = true, true
			}
		}
	}
	return free
}

// core returns the set of deadlocked owners whose deadlock self's wait
// must help break (see the top of the file), nil when there is none.
func (s *cycleSearch) core(free map[string]bool) map[string]bool {
	in := map[string]bool{}
	for o, n := range s.nodes {
		if n.rec != nil && !free[o] {
			in[o] = true
		}
	}
	for {
		comp := s.component(in)
		if len(comp) < 2 {
			return nil
		}
		stuck := s.stuckWithin(comp)
		if !stuck[s.self.owner] {
			return nil
		}
		if len(stuck) == len(comp) {
			return comp
		}
		in = stuck
	}
}

// component is self's strongly connected component in the graph of the
// owners of in: those self reaches and that reach self, through them.
func (s *cycleSearch) component(in map[string]bool) map[string]bool {
	if !in[s.self.owner] {
		return nil
	}
	reach := func(step func(o string) []string) map[string]bool {
		seen := map[string]bool{s.self.owner: true}
		for queue := []string{s.self.owner}; len(queue) > 0; queue = queue[1:] {
			for _, x := range step(queue[0]) {
				if in[x] && !seen[x] {
					seen[x] = true
					queue = append(queue, x)
				}
			}
		}
		return seen
	}
	forward := reach(func(o string) []string { return s.nodes[o].next })
	backward := reach(func(o string) []string {
		var from []string
		for x := range in {
			if slices.Contains(s.nodes[x].next, o) {
				from = append(from, x)
			}
		}
		return from
	})
	comp := map[string]bool{}
	for o := range forward {
		if backward[o] {
			comp[o] = true
		}
	}
	return comp
}

// stuckWithin returns the owners of set that stay deadlocked when every
// owner outside it is taken as free.
func (s *cycleSearch) stuckWithin(set map[string]bool) map[string]bool {
	free := map[string]bool{}
	isFree := func(o string) bool { return !set[o] || free[o] }
	for changed := true; changed; {
		changed = false
		for o := range set {
			if !free[o] && s.nodes[o].freedBy(isFree) {
				free[o], changed = true, true
			}
		}
	}
	stuck := map[string]bool{}
	for o := range set {
		if !free[o] {
			stuck[o] = true
		}
	}
	return stuck
}

// read counts one Redis read of the pass against its bound.
func (s *cycleSearch) read() error {
	if s.reads++; s.reads > deadlockMaxReads {
		return errSearchBound
	}
	return nil
}

// recordOf reads owner's wait record (nil: none, or not one).
func (s *cycleSearch) recordOf(owner string) (*waitRecord, error) {
	if err := s.read(); err != nil {
		return nil, err
	}
	c := s.c
	v, err := request(c, "deadlock check", func() (string, error) {
		v, err := c.rdb.Get(s.ctx, c.deadlockKey(owner)).Result()
		if errors.Is(err, redis.Nil) {
			return "", nil
		}
		return v, err
	})
	if err != nil {
		return nil, err
	}
	if r, ok := parseWaitRecord(owner, v); ok {
		return &r, nil
	}
	return nil, nil
}

// stateOf reads the state of lock that the search needs: whom its waiters
// wait for (waitedFor) and who holds what they ask for (holdsWaited).
func (s *cycleSearch) stateOf(lock LockInfo) (*inspect.State, error) {
	if st, ok := s.states[lock]; ok {
		return st, nil
	}
	if err := s.read(); err != nil {
		return nil, err
	}
	ks, err := newKeyspace(s.c.opts.prefix, lock.Name)
	if err != nil {
		return nil, err
	}
	var st *inspect.State
	if lock.Kind == KindSemaphore {
		st, err = s.semaphoreState(ks)
	} else {
		st, err = s.inspectState(ks)
	}
	if err != nil {
		return nil, err
	}
	s.states[lock] = st
	return st, nil
}

// inspectState reads the whole state of the lock name (the inspect
// script), as Inspect does.
func (s *cycleSearch) inspectState(ks keyspace) (*inspect.State, error) {
	res, err := s.c.eval(s.ctx, "deadlock check", inspectCall(ks)).Slice()
	if err != nil {
		return nil, err
	}
	return parseInspect(ks, res)
}

// semaphoreState reads a Semaphore's live holds alone: its holds by
// deadline, then their values, so that a search costs O(holds) where the
// whole state would also read every waiter's. Holds whose deadline passed
// on the server's clock are left out, as Inspect leaves them; the holders
// carry their owners only.
func (s *cycleSearch) semaphoreState(ks keyspace) (*inspect.State, error) {
	ctx, rdb := s.ctx, s.c.rdb
	st := &inspect.State{Name: ks.name, Semaphore: &inspect.Semaphore{}}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	live, err := rdb.ZRangeByScore(ctx, ks.key("sema:d"), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil || len(live) == 0 {
		return st, err
	}
	fields := make([]string, len(live))
	for i, gen := range live {
		fields[i] = "h:" + gen
	}
	vals, err := rdb.HMGet(ctx, ks.key("sema"), fields...).Result()
	if err != nil {
		return nil, err
	}
	for _, v := range vals {
		str, _ := v.(string)
		if _, owner, ok := strings.Cut(str, ":"); ok {
			st.Semaphore.Holders = append(st.Semaphore.Holders, inspect.Holder{Owner: owner})
		}
	}
	return st, nil
}

// waitedFor picks, from a lock's state, the owners a waiter of kind waits
// for, each once: the holders of a Lock, FairLock or Semaphore; the writer
// and the writers queued ahead of a reader; the writer and the readers of
// a writer.
func waitedFor(st *inspect.State, kind Kind) []string {
	hs := holdersOf(st, kind)
	if kind == KindReadLock || kind == KindWriteLock {
		hs = rwWaitedFor(st.RWLock, kind)
	}
	var out []string
	for _, h := range hs {
		if !slices.Contains(out, h.Owner) {
			out = append(out, h.Owner)
		}
	}
	return out
}

// rwWaitedFor is waitedFor of an RWLock.
func rwWaitedFor(rw *inspect.RW, kind Kind) []inspect.Holder {
	if rw == nil {
		return nil
	}
	var hs []inspect.Holder
	if rw.Writer != nil {
		hs = append(hs, *rw.Writer)
	}
	if kind == KindWriteLock {
		return append(hs, rw.Readers...)
	}
	for _, w := range rw.WritersWaiting {
		hs = append(hs, inspect.Holder{Owner: w.Owner})
	}
	return hs
}
