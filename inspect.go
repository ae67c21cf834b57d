package relock

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Read-only inspection of what Redis holds, for operators and tools (the
// relock command uses it). Hash fields starting with '~' are metadata; the
// fencing token is the field "~t".

// KindRWLock is an RWLock as a whole, as Inspect and ListLocks report it
// (events name its sides KindReadLock and KindWriteLock). Inspection reports
// KindLock, KindFairLock, KindRWLock, KindSemaphore and KindCountDownLatch:
// each type's state has keys of its own, so one name can exist as several
// kinds at once.
const KindRWLock Kind = "rwlock"

// LockState is a snapshot of everything relock keeps in Redis for one lock
// name, read atomically. A kind's field is nil when nobody holds that kind
// and nobody waits for it.
type LockState struct {
	// Name is the lock name.
	Name string
	// ServerTime is the Redis server's clock when the snapshot was taken;
	// every deadline is on that clock.
	ServerTime time.Time
	// Lock is the state of the Lock of this name.
	Lock *ExclusiveState
	// FairLock is the state of the FairLock of this name.
	FairLock *FairState
	// RWLock is the state of the RWLock of this name.
	RWLock *RWState
	// Semaphore is the state of the Semaphore of this name.
	Semaphore *SemaphoreInspect
	// CountDownLatch is the state of the CountDownLatch of this name, nil
	// when it is open (an open latch leaves nothing in Redis).
	CountDownLatch *LatchInspect
}

// Kinds returns the kinds that exist under the name (held or waited for), in
// the order Lock, FairLock, RWLock, Semaphore, CountDownLatch (closed); none
// when the name is unknown.
func (s *LockState) Kinds() []Kind {
	var out []Kind
	if s.Lock != nil {
		out = append(out, KindLock)
	}
	if s.FairLock != nil {
		out = append(out, KindFairLock)
	}
	if s.RWLock != nil {
		out = append(out, KindRWLock)
	}
	if s.Semaphore != nil {
		out = append(out, KindSemaphore)
	}
	if s.CountDownLatch != nil {
		out = append(out, KindCountDownLatch)
	}
	return out
}

// Exists reports whether any kind of lock of this name is held or waited for.
func (s *LockState) Exists() bool { return len(s.Kinds()) > 0 }

// Holder is one owner's hold of a lock.
type Holder struct {
	// Owner is the hash field of the owner: "<client uuid>:<n>", or the id
	// given to WithOwner.
	Owner string
	// Count is the owner's hold count (re-entries included).
	Count int
	// Lease is the hold's remaining lease: the hash's PTTL for a Lock or
	// FairLock, the holder's own deadline for an RWLock hold.
	Lease time.Duration
}

// Waiter is an owner waiting for a lock.
type Waiter struct {
	// Owner is the waiting owner, as Holder.Owner.
	Owner string
	// Deadline is when the waiter is evicted unless it renews its claim
	// (server clock); zero when Redis has no deadline for it.
	Deadline time.Time
	// Remaining is Deadline minus LockState.ServerTime (0 without deadline).
	Remaining time.Duration
}

// ExclusiveState is the state of a held Lock (or the hold of a FairLock).
type ExclusiveState struct {
	// Key is the Redis key of the lock's hash.
	Key string
	// Holders are the owners holding the lock: one, unless the data was
	// written by something other than relock.
	Holders []Holder
	// Lease is the lock's remaining lease (the hash's PTTL), 0 when free.
	Lease time.Duration
	// Token is the fencing token of the current hold, 0 with fencing off.
	Token int64
	// Queued are a Lock's waiters, in the order its releases hand it over
	// (they have no deadline: a waiter whose Client stopped listening is
	// skipped by the release). FairLock keeps its queue apart
	// (FairState.Waiters).
	Queued []Waiter
}

// FairState is the state of a FairLock: its hold, if any, and its queue.
type FairState struct {
	ExclusiveState
	// QueueKey is the Redis key of the queue of waiters.
	QueueKey string
	// Waiters are the queued owners, next in line first (a waiter whose
	// Client stopped listening stays listed until a hand-over skips it).
	Waiters []Waiter
}

// RWState is the state of an RWLock.
type RWState struct {
	// Key is the Redis key of the lock's hash.
	Key string
	// Readers are the owners holding read holds, by owner. Holds whose
	// deadline has passed are left out, as the lock itself ignores them.
	Readers []Holder
	// Writer is the owner of the write hold, or nil.
	Writer *Holder
	// Token is the fencing token of the write hold (0 without one, or with
	// fencing off).
	Token int64
	// WritersWaiting are the writers waiting for the write hold, in the
	// order the release that frees the lock hands it over (the first whose
	// Client still listens gets it). New readers wait behind them. Each claim lapses
	// at its Deadline unless the writer's next attempt renews it; lapsed
	// claims are left out.
	WritersWaiting []Waiter
}

// LockSummary is one line of ListLocks: one kind of lock under one name.
type LockSummary struct {
	// Name is the lock name.
	Name string
	// Kind is the lock type.
	Kind Kind
	// Holders is the number of owners holding it (readers and writer for an
	// RWLock).
	Holders int
	// Waiters is the number of queued waiters: a Lock's or a FairLock's, or
	// an RWLock's writers waiting.
	Waiters int
	// Lease is the longest remaining lease of its holds, 0 when not held.
	Lease time.Duration
	// Token is the fencing token of its exclusive hold, 0 if none.
	Token int64
	// Count is a CountDownLatch's count left; 0 for the other kinds.
	Count int
}

// Inspect reads, in one atomic script and without changing anything, the
// state of every kind of lock called name: holders with hold counts and
// remaining leases, fencing tokens, FairLock waiters and RWLock readers,
// writer and waiting writers. A name nobody holds or waits for gives a state
// whose Exists is false, not an error. It returns when ctx ends, with an
// error wrapping context.Cause(ctx) and ErrUnavailable, whether Redis has
// answered or not.
func (c *Client) Inspect(ctx context.Context, name string) (*LockState, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	ks, err := newKeyspace(c.opts.prefix, name)
	if err != nil {
		return nil, err
	}
	res, err := queryBounded(ctx, "inspect", func() ([]any, error) { return c.eval(ctx, "inspect", inspectCall(ks)).Slice() })
	if err != nil {
		return nil, err
	}
	return parseInspect(ks, res)
}

// parseInspect reads the inspect script's reply (see scripts/inspect.lua).
func parseInspect(ks keyspace, res []any) (*LockState, error) {
	if len(res) != 10 {
		return nil, fmt.Errorf("relock: inspect script returned %d values, want 10", len(res))
	}
	p := replyParser{res: res}
	sec, usec := p.int(0), p.int(1)
	now := time.UnixMicro(sec*1_000_000 + usec)
	nowMs := sec*1000 + usec/1000
	st := &LockState{Name: ks.name, ServerTime: now}

	if ex := exclusiveState(ks.key(""), p.strs(2), p.int(3)); len(ex.Holders) > 0 {
		st.Lock = &ex
	}
	fair := FairState{
		ExclusiveState: exclusiveState(ks.key("fair"), p.strs(4), p.int(5)),
		QueueKey:       ks.key("fair:q"),
		Waiters:        queuedWaiters(p.str(6)),
	}
	if len(fair.Holders) > 0 || len(fair.Waiters) > 0 {
		st.FairLock = &fair
	}
	if rw := rwState(ks.key("rw"), p.strs(7), nowMs); rw != nil {
		st.RWLock = rw
	}
	st.Semaphore = semaInspect(ks.key("sema"), p.strs(8), nowMs)
	st.CountDownLatch = latchInspect(ks.key("latch"), p.str(9))
	if p.err != nil {
		return nil, p.err
	}
	return st, nil
}

// exclusiveState reads a Lock or FairLock hash: owner fields hold counts,
// fields starting with '~' are metadata ("~t": fencing token, "~q": queue).
func exclusiveState(key string, fields []string, pttl int64) ExclusiveState {
	ex := ExclusiveState{Key: key}
	if pttl > 0 {
		ex.Lease = time.Duration(pttl) * time.Millisecond
	}
	for i := 0; i+1 < len(fields); i += 2 {
		f, v := fields[i], fields[i+1]
		if strings.HasPrefix(f, "~") {
			switch f {
			case "~t":
				ex.Token, _ = strconv.ParseInt(v, 10, 64)
			case "~q":
				ex.Queued = queuedWaiters(v)
			}
			continue
		}
		n, _ := strconv.Atoi(v)
		ex.Holders = append(ex.Holders, Holder{Owner: f, Count: n, Lease: ex.Lease})
	}
	sort.Slice(ex.Holders, func(i, j int) bool { return ex.Holders[i].Owner < ex.Holders[j].Owner })
	return ex
}

// queuedWaiters reads a Lock's queue (field ~q, see queue_common.lua) or a
// FairLock's (its own key, see fair_common.lua): per
// waiter four NUL-terminated fields, id, lease, fencing flag and owner.
func queuedWaiters(q string) []Waiter {
	f := strings.Split(q, "\x00")
	var out []Waiter
	for i := 0; i+3 < len(f); i += 4 {
		out = append(out, Waiter{Owner: f[i+3]})
	}
	return out
}

// rwHold gathers one owner's RWLock fields.
type rwHold struct {
	count, deadline int64
}

// rwState reads an RWLock hash, whose fields are "<kind>:<owner>": r/w hold
// counts, rd/wd deadlines (server ms); other kinds (generations, last ops)
// and '~' metadata are not shown. Nil when nobody holds or waits.
func rwState(key string, fields []string, nowMs int64) *RWState {
	rw := &RWState{Key: key}
	reads, writes, token := rwHolds(fields)
	rw.Readers = liveHolders(reads, nowMs)
	if w := liveHolders(writes, nowMs); len(w) > 0 {
		rw.Writer = &w[0]
	}
	if rw.Writer != nil {
		rw.Token = token
	}
	rw.WritersWaiting = queuedWriters(fieldValue(fields, "~q"), nowMs)
	if len(rw.Readers) == 0 && rw.Writer == nil && len(rw.WritersWaiting) == 0 {
		return nil
	}
	return rw
}

// rwHolds gathers an RWLock hash's fields per owner, read and write holds
// apart, and its token field "~t" (0 when absent).
func rwHolds(fields []string) (reads, writes map[string]*rwHold, token int64) {
	reads, writes = map[string]*rwHold{}, map[string]*rwHold{}
	get := func(m map[string]*rwHold, owner string) *rwHold {
		h := m[owner]
		if h == nil {
			h = &rwHold{}
			m[owner] = h
		}
		return h
	}
	for i := 0; i+1 < len(fields); i += 2 {
		f, v := fields[i], fields[i+1]
		if f == "~t" {
			token, _ = strconv.ParseInt(v, 10, 64)
			continue
		}
		kind, owner, ok := strings.Cut(f, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch kind {
		case "r":
			get(reads, owner).count = n
		case "rd":
			get(reads, owner).deadline = n
		case "w":
			get(writes, owner).count = n
		case "wd":
			get(writes, owner).deadline = n
		}
	}
	return reads, writes, token
}

// liveHolders are the holds of m whose deadline has not passed, by owner.
func liveHolders(m map[string]*rwHold, nowMs int64) []Holder {
	var out []Holder
	for owner, h := range m {
		if h.count > 0 && h.deadline > nowMs {
			out = append(out, Holder{Owner: owner, Count: int(h.count), Lease: time.Duration(h.deadline-nowMs) * time.Millisecond})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Owner < out[j].Owner })
	return out
}

// fieldValue returns the value of field f in HGETALL's flat reply ("" when
// absent).
func fieldValue(fields []string, f string) string {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == f {
			return fields[i+1]
		}
	}
	return ""
}

// queuedWriters reads an RWLock's queue of writers (field ~q, see
// rw_common.lua): per writer five NUL-terminated fields, waiter id, lease,
// fencing flag, owner and claim deadline (server ms). Lapsed claims are left
// out.
func queuedWriters(q string, nowMs int64) []Waiter {
	f := strings.Split(q, "\x00")
	var out []Waiter
	for i := 0; i+4 < len(f); i += 5 {
		dl, _ := strconv.ParseInt(f[i+4], 10, 64)
		if dl <= nowMs {
			continue
		}
		out = append(out, Waiter{
			Owner:     f[i+3],
			Deadline:  time.UnixMilli(dl),
			Remaining: time.Duration(dl-nowMs) * time.Millisecond,
		})
	}
	return out
}

// replyParser reads typed values out of a script's array reply, keeping the
// first error.
type replyParser struct {
	res []any
	err error
}

func (p *replyParser) fail(i int, want string) {
	if p.err == nil {
		p.err = fmt.Errorf("relock: inspect script value %d is %T, want %s", i, p.res[i], want)
	}
}

func (p *replyParser) int(i int) int64 {
	n, ok := p.res[i].(int64)
	if !ok {
		p.fail(i, "an integer")
	}
	return n
}

func (p *replyParser) str(i int) string {
	s, ok := p.res[i].(string)
	if !ok {
		p.fail(i, "a string")
	}
	return s
}

func (p *replyParser) strs(i int) []string {
	a, ok := p.res[i].([]any)
	if !ok {
		p.fail(i, "an array")
		return nil
	}
	out := make([]string, len(a))
	for j, v := range a {
		s, ok := v.(string)
		if !ok {
			p.fail(i, "an array of strings")
			return nil
		}
		out[j] = s
	}
	return out
}

// tagUnescaper undoes tagEscaper.
var tagUnescaper = strings.NewReplacer("%7B", "{", "%7D", "}", "%25", "%")

// globEscaper makes a string match itself in a Redis glob pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// kindOfSuffix tells which lock type a key suffix (after the name's tag)
// belongs to; keys that are not a lock's state (tails) give "".
func kindOfSuffix(suffix string) Kind {
	switch suffix {
	case "":
		return KindLock
	case ":fair", ":fair:q":
		return KindFairLock
	case ":rw":
		return KindRWLock
	case ":sema":
		return KindSemaphore
	case ":latch":
		return KindCountDownLatch
	}
	return ""
}

// ListLocks returns the locks that exist now, one LockSummary per kind of
// lock per name, sorted by name then kind. pattern is a Redis glob on the
// name ("" or "*": every lock), matched against the name's escaped form, in
// which '%', '{' and '}' match themselves (outside a [...] class). It SCANs
// the whole key space — of every master on a Cluster — so it is meant for
// operators, not for a hot path; a lock that ends while the scan runs may be
// left out. Only locks under the Client's key prefix are listed. Like
// Inspect, it returns when ctx ends.
func (c *Client) ListLocks(ctx context.Context, pattern string) ([]LockSummary, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return queryBounded(ctx, "list locks", func() ([]LockSummary, error) { return c.listLocks(ctx, pattern) })
}

// listLocks is ListLocks once its arguments are checked.
func (c *Client) listLocks(ctx context.Context, pattern string) ([]LockSummary, error) {
	kss, err := c.lockNames(ctx, pattern)
	if err != nil {
		return nil, err
	}
	var out []LockSummary
	const batch = 100
	for start := 0; start < len(kss); start += batch {
		states, err := c.inspectMany(ctx, kss[start:min(start+batch, len(kss))])
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			out = append(out, summarize(st)...)
		}
	}
	return out, nil
}

// lockNames SCANs for the names matching pattern that have a lock's state
// key (see ListLocks), and returns them sorted.
func (c *Client) lockNames(ctx context.Context, pattern string) ([]keyspace, error) {
	if pattern == "" {
		pattern = "*"
	}
	head := c.opts.prefix + ":{"
	match := globEscaper.Replace(head) + tagEscaper.Replace(pattern) + "}*"

	var mu sync.Mutex
	found := map[string]bool{} // escaped names with a lock's state key
	scan := func(ctx context.Context, rdb redis.Cmdable) error {
		iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			rest, ok := strings.CutPrefix(key, head)
			if !ok {
				continue
			}
			esc, suffix, ok := strings.Cut(rest, "}")
			if !ok || kindOfSuffix(suffix) == "" {
				continue
			}
			mu.Lock()
			found[esc] = true
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	} else {
		err = scan(ctx, c.rdb)
	}
	if err = c.noted("list locks", err); err != nil {
		return nil, err
	}

	var kss []keyspace
	for esc := range found {
		ks, err := newKeyspace(c.opts.prefix, tagUnescaper.Replace(esc))
		if err != nil {
			continue // not a name relock could have written
		}
		kss = append(kss, ks)
	}
	sort.Slice(kss, func(i, j int) bool { return kss[i].name < kss[j].name })
	return kss, nil
}

// inspectMany inspects several names in one pipeline (split per node on a
// Cluster), loading the script where a node does not know it yet.
func (c *Client) inspectMany(ctx context.Context, kss []keyspace) ([]*LockState, error) {
	calls := make([]scriptCall, len(kss))
	for i, ks := range kss {
		calls[i] = inspectCall(ks)
	}
	replies, _ := c.evalPipeline(ctx, "inspect", calls)
	out := make([]*LockState, 0, len(kss))
	for i, ks := range kss {
		res, err := replies[i].Slice()
		if err != nil {
			return nil, err
		}
		st, err := parseInspect(ks, res)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
