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

	"github.com/relock-go/relock/inspect"
)

// Read-only inspection of what Redis holds, for operators and tools (the
// relock command uses it). Hash fields starting with '~' are metadata; the
// fencing token is the field "~t".
//
// The views' types live in the inspect sub-package, not here: a program that
// only locks never names them, and the root package's surface stays the
// locks' own. The decoding stays here, because it reads the key layout, which
// is private to this package (docs/internals.md describes it).

// Inspect reads the state in Redis of every kind of lock called name.
func (c *Client) Inspect(ctx context.Context, name string) (*inspect.State, error) {
	if err := c.queryable(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	ks, err := newKeyspace(c.opts.prefix, name)
	if err != nil {
		return nil, err
	}
	return queryBounded(c, ctx, "inspect", func() (*inspect.State, error) {
		res, err := c.eval(ctx, "inspect", inspectCall(ks)).Slice()
		if err != nil {
			return nil, err
		}
		st, err := parseInspect(ks, res)
		if err != nil {
			return nil, err
		}
		if err := c.addWaits(ctx, st); err != nil {
			return nil, err
		}
		c.addNames(ctx, st)
		return st, nil
	})
}

// inspectCall reads, without writing, the state keys of every kind of lock
// of one name (see parseInspect).
func inspectCall(ks keyspace) scriptCall {
	var keys []string
	for _, k := range inspected {
		for _, s := range k.state {
			keys = append(keys, ks.key(s.suffix))
		}
	}
	return scriptCall{script: inspectScript, keys: keys, args: inspectTypes}
}

// parseInspect reads the inspect script's reply (see scripts/inspect.lua):
// the server's time, then each state key's value and PTTL, which each kind's
// decode turns into its part of the state.
func parseInspect(ks keyspace, res []any) (*inspect.State, error) {
	if want := 2 + 2*len(inspectTypes); len(res) != want {
		return nil, fmt.Errorf("relock: inspect script returned %d values, want %d", len(res), want)
	}
	p := replyParser{res: res}
	sec, usec := p.int(0), p.int(1)
	nowMs := sec*1000 + usec/1000
	st := &inspect.State{Name: ks.name, ServerTime: time.UnixMicro(sec*1_000_000 + usec)}
	i := 2
	for _, k := range inspected {
		v := make([]keyValue, len(k.state))
		for j, s := range k.state {
			v[j] = keyValue{key: ks.key(s.suffix), pttl: p.int(i + 1)}
			if s.typ == "hash" || s.typ == "zset" {
				v[j].fields = p.strs(i)
				if err := hashLayout(v[j].key, v[j].fields, s.typ); err != nil {
					return nil, err
				}
			} else {
				v[j].str = p.str(i)
			}
			i += 2
		}
		if p.err != nil {
			return nil, p.err
		}
		k.decode(st, v, nowMs)
	}
	return st, nil
}

// exclusiveState reads a Lock or FairLock hash: owner fields hold counts,
// fields starting with '~' are metadata ("~t": fencing token; a Lock's
// queue: "~#<position>" each entry, see queue_common.lua).
func exclusiveState(key string, fields []string, pttl int64) inspect.Exclusive {
	ex := inspect.Exclusive{Key: key}
	if pttl > 0 {
		ex.Lease = time.Duration(pttl) * time.Millisecond
	}
	var queued []positioned
	for i := 0; i+1 < len(fields); i += 2 {
		f, v := fields[i], fields[i+1]
		if strings.HasPrefix(f, "~") {
			if f == "~t" {
				ex.Token, _ = strconv.ParseInt(v, 10, 64)
			} else if k, err := strconv.ParseInt(strings.TrimPrefix(f, "~#"), 10, 64); err == nil && strings.HasPrefix(f, "~#") {
				queued = append(queued, positioned{k, v})
			}
			continue
		}
		n, _ := strconv.Atoi(v)
		ex.Holders = append(ex.Holders, inspect.Holder{Owner: f, Count: n, Lease: ex.Lease})
	}
	if len(ex.Holders) == 0 {
		// A free hash lives on for the unlock latch (release_common.lua):
		// its PTTL is no lease.
		ex.Lease = 0
	}
	sort.Slice(ex.Holders, func(i, j int) bool { return ex.Holders[i].Owner < ex.Holders[j].Owner })
	sort.Slice(queued, func(i, j int) bool { return queued[i].at < queued[j].at })
	for _, q := range queued {
		ex.Queued = append(ex.Queued, queuedWaiters(q.entry)...)
	}
	return ex
}

// positioned is a queue entry and its place.
type positioned struct {
	at    int64
	entry string
}

// queuedWaiters reads queue entries, concatenated: a Lock's (one per field,
// see queue_common.lua) or a FairLock's (one per member of its sorted set,
// see fair_common.lua): per waiter four NUL-terminated fields, id, lease,
// fencing flag and owner.
func queuedWaiters(q string) []inspect.Waiter {
	f := strings.Split(q, "\x00")
	var out []inspect.Waiter
	for i := 0; i+3 < len(f); i += 4 {
		out = append(out, inspect.Waiter{Owner: f[i+3]})
	}
	return out
}

// sortedEntries reads a sorted set as the inspect script returns it
// (member, score, ... in order) into its members, concatenated.
func sortedEntries(flat []string) string {
	var b strings.Builder
	for i := 0; i < len(flat); i += 2 {
		b.WriteString(flat[i])
	}
	return b.String()
}

// rwHold gathers one owner's RWLock fields.
type rwHold struct {
	count, deadline int64
}

// rwState reads an RWLock hash, whose fields are "<kind>:<owner>": r/w hold
// counts, rd/wd deadlines (server ms); other kinds (generations, last ops)
// and '~' metadata are not shown. Nil when nobody holds or waits.
func rwState(key string, fields, queue []string, nowMs int64) *inspect.RW {
	rw := &inspect.RW{Key: key}
	reads, writes, token := rwHolds(fields)
	rw.Readers = liveHolders(reads, nowMs)
	if w := liveHolders(writes, nowMs); len(w) > 0 {
		rw.Writer = &w[0]
	}
	if rw.Writer != nil {
		rw.Token = token
	}
	rw.WritersWaiting = queuedWriters(fieldValue(fields, "~q"), queue, nowMs)
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
func liveHolders(m map[string]*rwHold, nowMs int64) []inspect.Holder {
	var out []inspect.Holder
	for owner, h := range m {
		if h.count > 0 && h.deadline > nowMs {
			out = append(out, inspect.Holder{Owner: owner, Count: int(h.count), Lease: time.Duration(h.deadline-nowMs) * time.Millisecond})
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

// queuedWriters reads an RWLock's queue of writers (see rw_common.lua):
// mark is the hash's ~q, "<last> <deadline> <head> <count>", and queue the
// sorted set's members and scores (ZRANGE WITHSCORES), per writer four
// NUL-terminated fields, waiter id, lease, fencing flag and owner, scored by
// arrival; those scored below the head were walked past already. The claim
// is the queue's: each writer's lapses at the mark's deadline, and a lapsed
// queue (or one without a mark: a leftover) shows nobody.
func queuedWriters(mark string, queue []string, nowMs int64) []inspect.Waiter {
	f := strings.Fields(mark)
	if len(f) != 4 {
		return nil
	}
	dl, _ := strconv.ParseInt(f[1], 10, 64)
	head, _ := strconv.ParseFloat(f[2], 64)
	if dl <= nowMs {
		return nil
	}
	var live strings.Builder
	for i := 0; i+1 < len(queue); i += 2 {
		if sc, _ := strconv.ParseFloat(queue[i+1], 64); sc >= head {
			live.WriteString(queue[i])
		}
	}
	out := queuedWaiters(live.String())
	for i := range out {
		out[i].Deadline = time.UnixMilli(dl)
		out[i].Remaining = time.Duration(dl-nowMs) * time.Millisecond
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

// ListLocks lists the locks whose name matches pattern (a glob), by SCAN.
// Their Owners carry their Clients' names as Inspect's do.
func (c *Client) ListLocks(ctx context.Context, pattern string) ([]inspect.Summary, error) {
	if err := c.queryable(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return queryBounded(c, ctx, "list locks", func() ([]inspect.Summary, error) { return c.listLocks(ctx, pattern) })
}

// listLocks is ListLocks once its arguments are checked.
func (c *Client) listLocks(ctx context.Context, pattern string) ([]inspect.Summary, error) {
	kss, err := c.lockNames(ctx, pattern)
	if err != nil {
		return nil, err
	}
	var out []inspect.Summary
	const batch = 100
	for start := 0; start < len(kss); start += batch {
		states, err := c.inspectMany(ctx, kss[start:min(start+batch, len(kss))])
		if err != nil {
			return nil, err
		}
		c.addNames(ctx, states...)
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
			if !ok || kindOfSuffix[suffix] == "" {
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
func (c *Client) inspectMany(ctx context.Context, kss []keyspace) ([]*inspect.State, error) {
	calls := make([]scriptCall, len(kss))
	for i, ks := range kss {
		calls[i] = inspectCall(ks)
	}
	replies, _ := c.evalPipeline(ctx, "inspect", calls)
	out := make([]*inspect.State, 0, len(kss))
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

// summarize turns a state into one summary per kind that exists.
func summarize(st *inspect.State) []inspect.Summary {
	var out []inspect.Summary
	for _, k := range inspected {
		if s, ok := k.summary(st); ok {
			s.Name, s.Kind = st.Name, k.view
			out = append(out, s)
		}
	}
	return out
}
