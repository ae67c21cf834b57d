package relock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// hold is the Client's record of one owner's hold on one lock: one
// generation in Redis, from the grant that started it to its final release.
// Each successful Lock adds an entry (one hold context); each Unlock ends
// exactly the entry of the context it is given.
type hold struct {
	key    holdKey
	scheme scheme
	// sem serialises the Redis operations of this owner on this lock, so
	// that requests of one generation reach Redis in the order they are made.
	// A record has one only while it has users (semPool): a held lock that
	// nobody is calling on keeps none.
	sem chan struct{}

	// Guarded by registry.mu.
	gen   string // the generation in Redis; "" while not held
	token int64  // fencing token of the generation
	// at is the position in the lock's queue from which the generation
	// was handed over (0: none known), so that its release reads the
	// entry after it, the likely head, with the hold (lock_release.lua).
	at    int64
	since monoTime // when the generation was granted
	// expiresAt is when the lease ends by this Client's clock (measured from
	// before the script that set it was sent, less a drift margin, so never
	// later than Redis's); the Client's lease heap (leases.go) ends the hold
	// then unless a renewal or re-entry moved it. Written under
	// registry.mu; the hold context's Err reads it without (entry.Err).
	expiresAt atomicMono
	drift     time.Duration // how much sooner than its lease the hold counts as gone (traits.drift)
	entries   *entry        // live hold contexts, newest first (entry.next)
	users     int32         // goroutines between enter and exit
	slot      int32         // 1 + the hold's index in the lease heap; 0: not in it
	// told: the end of the generation was reported (a Lost, or a final
	// Released when an Observer is set), so that no second end is. Reset
	// by grant for a new generation.
	told      atomic.Bool
	watched   bool // renewed by the watchdog: some entry has lease 0
	releasing bool // a final release is in flight: a renewal miss is expected
	// void: the acquire that started the generation was sent twice (a
	// request cut short, then sent again: lockCall.awaitResend), and the
	// first may still reach Redis; the final release marks the generation
	// void, so that it takes nothing then (void_common.lua).
	void bool
}

type holdKey struct{ id, owner string }

// A monoTime is an instant as the time since epoch by the monotonic clock,
// 0 for none: one word, where a time.Time takes three.
type monoTime time.Duration

// epoch is older than any instant a hold keeps.
var epoch = time.Now().Add(-time.Second)

func monoOf(t time.Time) monoTime {
	if t.IsZero() {
		return 0
	}
	return monoTime(t.Sub(epoch))
}

// An atomicMono is a monoTime read and written atomically.
type atomicMono struct{ v atomic.Int64 }

func (a *atomicMono) get() monoTime   { return monoTime(a.v.Load()) }
func (a *atomicMono) set(m monoTime)  { a.v.Store(int64(m)) }
func (a *atomicMono) time() time.Time { return a.get().time() }

func (m monoTime) time() time.Time {
	if m == 0 {
		return time.Time{}
	}
	return epoch.Add(time.Duration(m))
}

// entry is one hold context: one successful Lock of an owner, and the
// context that carries it, in one allocation (context.WithValue would take
// a second). It answers entryKey{its hold's Client} with itself, as
// WithValue(ctx, entryKey{c}, e) would, and every other key as its
// cancellable context.
type entry struct {
	context.Context // the entry's cancellable context
	h               *hold
	next            *entry // the hold's next older entry
	gen             string
	lease           time.Duration // 0: kept by the watchdog
	cancel          context.CancelCauseFunc
	ended           error // why the entry ended (nil while live); guarded by registry.mu
	// parent is the context the entry's context was derived from, other
	// entries of a MultiLock's call aside, and for a re-entry the caller's
	// context: what a re-entry made with this entry's context follows once
	// this entry is unlocked (reentry.go).
	parent context.Context
}

func (e *entry) Value(key any) any {
	switch k := key.(type) {
	case entryKey:
		if k.c == e.h.client() {
			return e
		}
	case anyEntryKey:
		return e
	}
	return e.Context.Value(key)
}

// anyEntryKey finds, in a hold context, the nearest entry of any Client.
type anyEntryKey struct{}

// Err is nil while the hold lives, and its end's error once it has ended:
// unlocked, lost, or its lease run out by its Client's clock. The lease
// end is read at each call, the hold's and those of the holds whose
// contexts this one was made from (a MultiLock's other parts, an outer
// hold), not only left to the lease heap's timer, which fires late on a
// loaded machine: a holder that checks Err before each write never writes
// past its lease because the timer was late. Err then ends the hold itself,
// as the timer would (its Lost event included), so that Done is closed when
// Err reports the end, as context.Context requires. A context derived from
// a hold context (context.WithCancel) ends when Done closes, at the timer:
// its own Err does not read the lease end.
func (e *entry) Err() error {
	if err := e.Context.Err(); err != nil {
		return err
	}
	now := monoOf(time.Now())
	for x := e; x != nil; x = x.up() {
		if end := x.h.expiresAt.get(); end != 0 && now >= end {
			x.h.client().expireLeases()
			return e.Context.Err()
		}
	}
	return nil
}

// up is the nearest entry, of any Client, in the context e's context was
// made from (nil: none).
func (e *entry) up() *entry {
	u, _ := e.Context.Value(anyEntryKey{}).(*entry)
	return u
}

func (e *entry) String() string { return "relock.holdContext(" + e.h.key.id + ")" }

// outer is the nearest entry of the same Client in the context e's context
// was made from (nil: none): see entryKey.
func (e *entry) outer() *entry {
	o, _ := e.Context.Value(entryKey{e.h.client()}).(*entry)
	return o
}

// entryKey finds, in a hold context, the nearest entry of one Client; from
// there its outer links lead to every entry of that Client the context
// carries, nearest first. A context derived from several hold contexts
// carries all their entries; the nearest one of a lock is the one Unlock
// ends. The key is the Client alone, not the Client and the lock's id: a
// key of one pointer is boxed without an allocation, and a Lock and its
// Unlock each boxed the pair.
type entryKey struct{ c *Client }

// entryFrom returns the nearest entry of c's on the lock (hold id) id in
// ctx, nil if it carries none.
func entryFrom(ctx context.Context, c *Client, id string) *entry {
	e, _ := ctx.Value(entryKey{c}).(*entry)
	for e != nil && e.h.key.id != id {
		e = e.outer()
	}
	return e
}

// registry holds the Client's hold records.
//
// Lock order, for the whole Client: hold.sem, then registry.mu, then
// watchdog.mu. The subscriber's mutex is never held together with these.
type registry struct {
	mu     sync.Mutex
	m      map[holdKey]*hold
	leases leaseHeap
}

// semPool keeps the semaphores of records that have no user: every one in
// it is empty.
var semPool = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// useLocked counts the caller as a user of h, giving h a semaphore if it
// has none. Called with the registry lock held.
func (h *hold) useLocked() {
	if h.users == 0 {
		h.sem = semPool.Get().(chan struct{})
	}
	h.users++
}

func (r *registry) init() { r.m = make(map[holdKey]*hold) }

// enter returns the record for (s, owner), creating it, and counts the caller
// as its user until exit.
func (r *registry) enter(s scheme, owner string) *hold {
	k := holdKey{s.holdID(), owner}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.m[k]
	if h == nil {
		h = &hold{key: k, scheme: s}
		r.m[k] = h
	}
	h.useLocked()
	return h
}

// use counts the caller as a user of a record it already has.
func (r *registry) use(h *hold) {
	r.mu.Lock()
	h.useLocked()
	r.mu.Unlock()
}

func (r *registry) exit(h *hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Every user gives the semaphore back before it exits (leave): the
	// last one leaves it empty.
	if h.users--; h.users == 0 {
		semPool.Put(h.sem)
		h.sem = nil
	}
	r.dropIfIdle(h)
}

func (r *registry) dropIfIdle(h *hold) {
	if h.users == 0 && h.gen == "" && r.m[h.key] == h {
		delete(r.m, h.key)
	}
}

// generation returns the generation h holds, "" for none.
func (r *registry) generation(h *hold) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return h.gen
}

// find returns the live hold of owner on the lock id, if any.
func (r *registry) find(id, owner string) (gen string, token int64, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.m[holdKey{id, owner}]; h != nil {
		return h.gen, h.token, h.expiresAt.time()
	}
	return "", 0, time.Time{}
}

// holdsGeneration reports whether some owner of this Client holds
// generation gen of the lock id.
func (r *registry) holdsGeneration(id, gen string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.m {
		if k.id == id && h.gen == gen {
			return true
		}
	}
	return false
}

// tracked reports whether the Client has a record of owner on the lock id:
// it holds it, or a call of that owner on it is under way.
func (r *registry) tracked(id, owner string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[holdKey{id, owner}] != nil
}

// grant records a granted generation gen (token its fencing token) as a new
// entry of h and returns its context, derived from from. parent is what a
// re-entry made with the entry's context follows once the entry is unlocked
// (entry.parent). started is when the acquire script was sent: the lease
// runs from no earlier than that.
//
// Once the Client is closed it records nothing and returns nil: nothing
// would renew the hold. The check is made under the registry lock, which
// Close's cancelAll takes after marking the Client closed, so a grant is
// either recorded before cancelAll (which cancels it) or refused. The hold
// context is made before the lock is taken: the lock is the whole Client's.
func (c *Client) grant(h *hold, from, parent context.Context, g partGrant, lease time.Duration, started time.Time) context.Context {
	ctx, cancel := context.WithCancelCause(from)
	e := &entry{Context: ctx, h: h, lease: lease, cancel: cancel, parent: parent}
	life := safeLease(c.leaseFor(lease))
	drift := h.scheme.traits().drift(c.leaseFor(lease))
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.closed.Load() {
		cancel(ErrClientClosed) // detaches it from from
		return nil
	}
	if h.gen == "" {
		h.gen, h.token, h.at, h.drift, h.since, h.void = g.gen, g.token, g.at, drift, monoOf(started), g.void
		h.told.Store(false)
	}
	e.gen, e.next, h.entries = h.gen, h.entries, e
	if lease == 0 && !h.watched {
		h.watched = true
		c.dog.watch()
	}
	c.extendLocked(h, started.Add(life-h.drift))
	return e
}

// next is the queue position that h's final release expects at the head of
// the lock's queue (0: none known; see hold.at). The caller holds
// registry.mu.
func (h *hold) next() int64 {
	if h.at <= 0 {
		return 0
	}
	return h.at + 1
}

// client is the Client that keeps h.
func (h *hold) client() *Client { return h.scheme.client() }

// safeLease is how long after sending the script that set it a holder may
// count on a lease: less a margin, as Redlock does, for the drift between the
// client's clock and the server's and for the timer firing late.
func safeLease(lease time.Duration) time.Duration {
	return lease - min(lease/100+2*time.Millisecond, lease/4)
}

// end ends generation gen of h with cause: every entry's context is
// cancelled and nothing renews it any more. A gen that h no longer holds is
// a stale report (a reply about an older hold) and changes nothing.
func (c *Client) end(h *hold, gen string, cause error) {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	c.endLocked(h, gen, cause)
}

func (c *Client) endLocked(h *hold, gen string, cause error) {
	if h.gen == "" || h.gen != gen {
		return
	}
	h.gen = ""
	h.releasing = false
	h.watched = false
	c.dropLeaseLocked(h)
	entries := h.entries
	h.entries = nil
	c.holds.dropIfIdle(h)
	for e := entries; e != nil; e = e.next {
		e.ended = cause
	}
	if lost(cause) {
		c.emitLost(h, cause)
	}
	// Signal last, so that a holder woken by Done sees the hold fully ended.
	for e := entries; e != nil; e = e.next {
		e.cancel(cause)
	}
}

// endEntry ends one entry of a hold that goes on (a re-entry's Unlock).
// Called with the registry lock held.
func (c *Client) endEntryLocked(e *entry, cause error) {
	h := e.h
	if e.ended != nil {
		return
	}
	e.ended = cause
	for p := &h.entries; *p != nil; p = &(*p).next {
		if *p == e {
			*p = e.next
			break
		}
	}
	if h.watched && e.lease == 0 {
		watched := false
		for x := h.entries; x != nil; x = x.next {
			watched = watched || x.lease == 0
		}
		h.watched = watched
	}
	e.cancel(cause)
}

// cancelAll cancels every open hold's context with cause, keeping the
// records so that Unlock can still release them. For the Observer (and the
// log) each open hold is lost: nothing renews it any more.
func (c *Client) cancelAll(cause error) {
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.m {
		if h.gen != "" {
			c.emitLost(h, cause)
		}
		for e := h.entries; e != nil; e = e.next {
			e.cancel(cause)
		}
	}
}

// endForced ends the holds this Client has on the lock with registry id
// whose generation is one of gens, those a force release removed: a
// ForceUnlock, whose cause it tags as such. A hold of another generation —
// one the force release handed over to a waiter of this Client — is not
// touched.
func (c *Client) endForced(id string, gens []string, cause error) {
	cause = lossCause(LossForceUnlocked, cause)
	r := &c.holds
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.m {
		if k.id == id && h.gen != "" && slices.Contains(gens, h.gen) {
			c.endLocked(h, h.gen, cause)
		}
	}
}

// live returns the holds that have a generation: all of them, or only the
// watched ones.
func (r *registry) live(watchedOnly bool) []*hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*hold
	for _, h := range r.m {
		if h.gen != "" && (h.watched || !watchedOnly) {
			out = append(out, h)
		}
	}
	return out
}
