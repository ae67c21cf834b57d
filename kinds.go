package relock

import (
	"fmt"
	"strconv"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

// kindRow is one kind of lock: everything that Inspect, ListLocks,
// Channels, the relock command and the Observer know of it. Its code lives
// in its own file and its scripts; this row is the one place that names it
// to the rest.
type kindRow struct {
	typeName string       // its Go type
	view     inspect.Kind // its kind in inspect's views; "" for a kind stored as Locks
	events   []Kind       // the Kinds of its Observer events (relockotel's lock.kind)
	// state are the keys of its state, which the inspect script reads in
	// this order and by which ListLocks finds a name; a key of another Redis
	// type reads as absent.
	state []stateKey
	// decode sets its part of st from its state keys' values.
	decode func(st *inspect.State, v []keyValue, nowMs int64)
	// summary is its line of ListLocks (without the name); false when st
	// has no such lock.
	summary func(st *inspect.State) (inspect.Summary, bool)
	// channels sets its fields of Channels.
	channels func(ks keyspace, ch *inspect.Channels)
	// tool is what the relock command does with it (Table of
	// internal/kinds); its Releases is set from force.
	tool  kinds.Kind
	force func(c *Client, name string, st *inspect.State) []kinds.Release
}

// stateKey is one state key of a kind: its suffix after the name's tag
// (see keyspace.key) and its Redis type, "hash" or "string".
type stateKey struct{ suffix, typ string }

// keyValue is what the inspect script read of one state key: its fields
// (a hash) or its value (a string), its PTTL (-2: absent), and its name.
type keyValue struct {
	key    string
	fields []string
	str    string
	pttl   int64
}

// kindTable is every kind, in the order inspections and summaries list
// them. MultiLock and RedLock are made of Locks: in Redis, in Inspect and
// in ListLocks they are Locks (a RedLock's owner ends in ":red" on each of
// its instances); only their Observer events have kinds of their own.
var kindTable = []kindRow{
	{typeName: "Lock", view: inspect.KindLock, events: []Kind{KindLock},
		state:  []stateKey{{"", "hash"}},
		decode: decodeLock, summary: summarizeLock, channels: lockChannels,
		tool:  kinds.Kind{Rows: lockRows, Listen: lockListen, Watched: func(ch inspect.Channels) []string { return []string{ch.Lock} }},
		force: forceLock},
	{typeName: "FairLock", view: inspect.KindFairLock, events: []Kind{KindFairLock},
		state:  []stateKey{{"fair", "hash"}, {"fair:q", "string"}},
		decode: decodeFair, summary: summarizeFair, channels: fairChannels,
		tool:  kinds.Kind{Rows: fairRows, Listen: fairListen, Watched: func(ch inspect.Channels) []string { return []string{ch.Fair} }},
		force: forceFair},
	{typeName: "RWLock", view: inspect.KindRWLock, events: []Kind{KindReadLock, KindWriteLock},
		state:  []stateKey{{"rw", "hash"}},
		decode: decodeRW, summary: summarizeRW, channels: rwChannels,
		tool:  kinds.Kind{Rows: rwRows, Listen: rwListen, Watched: func(ch inspect.Channels) []string { return []string{ch.RWRead} }},
		force: forceRW},
	{typeName: "MultiLock", events: []Kind{KindMultiLock}},
	{typeName: "RedLock", events: []Kind{KindRedLock}},
	{typeName: "Semaphore", view: inspect.KindSemaphore, events: []Kind{KindSemaphore},
		state:  []stateKey{{"sema", "hash"}},
		decode: decodeSema, summary: summarizeSema, channels: semaChannels,
		tool:  kinds.Kind{Rows: semaRows},
		force: forceSema},
	{typeName: "CountDownLatch", view: inspect.KindCountDownLatch, events: []Kind{KindCountDownLatch},
		state:  []stateKey{{"latch", "hash"}},
		decode: decodeLatch, summary: summarizeLatch, channels: latchChannels,
		tool:  kinds.Kind{Rows: latchRows, Watched: func(ch inspect.Channels) []string { return []string{ch.Latch} }},
		force: forceLatch},
}

// inspected are the rows Inspect reports: those with state of their own.
var inspected = func() []kindRow {
	var out []kindRow
	for _, k := range kindTable {
		if k.view != "" {
			out = append(out, k)
		}
	}
	return out
}()

// kindOfSuffix tells which kind a key suffix (after the name's tag) is the
// state of; a key that is no kind's state (a tail, a channel) gives "".
var kindOfSuffix = func() map[string]inspect.Kind {
	m := map[string]inspect.Kind{}
	for _, k := range inspected {
		for _, s := range k.state {
			m[keyspace{}.key(s.suffix)] = k.view
		}
	}
	return m
}()

// inspectTypes are the inspect script's ARGV: the Redis type of each state
// key, in the order of its KEYS.
var inspectTypes = func() []any {
	var out []any
	for _, k := range inspected {
		for _, s := range k.state {
			out = append(out, s.typ)
		}
	}
	return out
}()

func init() {
	for _, k := range inspected {
		t, force := k.tool, k.force
		t.View, t.Type = k.view, k.typeName
		t.Releases = func(c any, name string, st *inspect.State) []kinds.Release { return force(c.(*Client), name, st) }
		kinds.Table = append(kinds.Table, t)
	}
}

// Kinds returns every Kind an Observer's events may carry, once each, in
// a fixed order: one or more per type of lock.
func Kinds() []Kind {
	var out []Kind
	for _, k := range kindTable {
		out = append(out, k.events...)
	}
	return out
}

// Lock.

func decodeLock(st *inspect.State, v []keyValue, _ int64) {
	if ex := exclusiveState(v[0].key, v[0].fields, v[0].pttl); len(ex.Holders) > 0 {
		st.Lock = &ex
	}
}

func summarizeLock(st *inspect.State) (inspect.Summary, bool) {
	l := st.Lock
	if l == nil {
		return inspect.Summary{}, false
	}
	return inspect.Summary{Holders: len(l.Holders), Waiters: len(l.Queued), Lease: l.Lease, Token: l.Token}, true
}

func lockChannels(ks keyspace, ch *inspect.Channels) {
	k := lockKeysOf(ks)
	ch.Lock, ch.LockHandOverPrefix = k.channel, k.hash+":w:"
}

func lockRows(st *inspect.State) []kinds.Row {
	l := st.Lock
	if l == nil {
		return nil
	}
	rows := exclusiveRows(*l)
	for i, w := range l.Queued {
		rows = append(rows, kinds.Row{Role: queued(i), Owner: w.Owner, Holds: "-"})
	}
	return rows
}

func lockListen(st *inspect.State) (string, string) {
	if st.Lock == nil {
		return "", ""
	}
	return st.Lock.Key, "~m"
}

func forceLock(c *Client, name string, st *inspect.State) []kinds.Release {
	l := st.Lock
	if l == nil || len(l.Holders) == 0 {
		return nil
	}
	return []kinds.Release{{Holders: l.Holders, Unit: "hold", Next: wokeFirst(len(l.Queued)), Do: c.Lock(name).ForceUnlock}}
}

// FairLock.

func decodeFair(st *inspect.State, v []keyValue, _ int64) {
	fair := inspect.Fair{
		Exclusive: exclusiveState(v[0].key, v[0].fields, v[0].pttl),
		QueueKey:  v[1].key,
		Waiters:   queuedWaiters(v[1].str),
	}
	if len(fair.Holders) > 0 || len(fair.Waiters) > 0 {
		st.FairLock = &fair
	}
}

func summarizeFair(st *inspect.State) (inspect.Summary, bool) {
	f := st.FairLock
	if f == nil {
		return inspect.Summary{}, false
	}
	return inspect.Summary{Holders: len(f.Holders), Waiters: len(f.Waiters), Lease: f.Lease, Token: f.Token}, true
}

func fairChannels(ks keyspace, ch *inspect.Channels) {
	k := fairKeysOf(ks)
	ch.Fair, ch.FairHandOverPrefix = k.channel, k.hash+":w:"
}

func fairRows(st *inspect.State) []kinds.Row {
	f := st.FairLock
	if f == nil {
		return nil
	}
	rows := exclusiveRows(f.Exclusive)
	for i, w := range f.Waiters {
		rows = append(rows, kinds.Row{Role: queued(i), Owner: w.Owner, Holds: "-", Expires: w.Remaining})
	}
	return rows
}

func fairListen(st *inspect.State) (string, string) {
	if st.FairLock == nil || len(st.FairLock.Holders) == 0 {
		return "", ""
	}
	return st.FairLock.Key, "~m"
}

func forceFair(c *Client, name string, st *inspect.State) []kinds.Release {
	f := st.FairLock
	if f == nil || len(f.Holders) == 0 {
		return nil
	}
	return []kinds.Release{{Holders: f.Holders, Unit: "hold", Next: wokeFirst(len(f.Waiters)), Do: c.FairLock(name).ForceUnlock}}
}

// RWLock.

func decodeRW(st *inspect.State, v []keyValue, nowMs int64) {
	st.RWLock = rwState(v[0].key, v[0].fields, nowMs)
}

func summarizeRW(st *inspect.State) (inspect.Summary, bool) {
	rw := st.RWLock
	if rw == nil {
		return inspect.Summary{}, false
	}
	s := inspect.Summary{Holders: len(rw.Readers), Waiters: len(rw.WritersWaiting), Token: rw.Token}
	for _, h := range rw.Readers {
		s.Lease = max(s.Lease, h.Lease)
	}
	if rw.Writer != nil {
		s.Holders++
		s.Lease = max(s.Lease, rw.Writer.Lease)
	}
	return s, true
}

func rwChannels(ks keyspace, ch *inspect.Channels) {
	k := rwKeysOf(ks)
	ch.RWRead, ch.RWHandOverPrefix = k.readCh, k.hash+":w:"
}

func rwRows(st *inspect.State) []kinds.Row {
	rw := st.RWLock
	if rw == nil {
		return nil
	}
	var rows []kinds.Row
	if h := rw.Writer; h != nil {
		rows = append(rows, kinds.Row{Role: "writer", Owner: h.Owner, Holds: strconv.Itoa(h.Count), Expires: h.Lease, Token: rw.Token})
	}
	for _, h := range rw.Readers {
		rows = append(rows, kinds.Row{Role: "reader", Owner: h.Owner, Holds: strconv.Itoa(h.Count), Expires: h.Lease})
	}
	for _, w := range rw.WritersWaiting {
		rows = append(rows, kinds.Row{Role: "writer waiting", Owner: w.Owner, Holds: "-", Expires: w.Remaining})
	}
	return rows
}

func rwListen(st *inspect.State) (string, string) {
	rw := st.RWLock
	if rw == nil || (len(rw.Readers) == 0 && rw.Writer == nil) {
		return "", ""
	}
	return rw.Key, "~r"
}

func forceRW(c *Client, name string, st *inspect.State) []kinds.Release {
	rw := st.RWLock
	if rw == nil {
		return nil
	}
	var out []kinds.Release
	if rw.Writer != nil {
		out = append(out, kinds.Release{Mode: "write", Holders: []inspect.Holder{*rw.Writer}, Unit: "hold", Do: c.RWLock(name).WriteLock().ForceUnlock})
	}
	if len(rw.Readers) > 0 {
		out = append(out, kinds.Release{Mode: "read", Holders: rw.Readers, Unit: "hold", Do: c.RWLock(name).ReadLock().ForceUnlock})
	}
	return out
}

// Semaphore.

func decodeSema(st *inspect.State, v []keyValue, nowMs int64) {
	st.Semaphore = semaInspect(v[0].key, v[0].fields, nowMs)
}

func summarizeSema(st *inspect.State) (inspect.Summary, bool) {
	sm := st.Semaphore
	if sm == nil {
		return inspect.Summary{}, false
	}
	s := inspect.Summary{Holders: len(sm.Holders), Waiters: len(sm.Waiters)}
	for _, h := range sm.Holders {
		s.Lease = max(s.Lease, h.Lease)
	}
	return s, true
}

func semaChannels(ks keyspace, ch *inspect.Channels) {
	ch.SemaphoreHandOverPrefix = ks.key("sema") + ":w:"
}

// semaRows: HOLDS is a hold's permits, of the Semaphore's.
func semaRows(st *inspect.State) []kinds.Row {
	sm := st.Semaphore
	if sm == nil {
		return nil
	}
	var rows []kinds.Row
	for _, h := range sm.Holders {
		rows = append(rows, kinds.Row{Role: "holder", Owner: h.Owner, Holds: fmt.Sprintf("%d/%d", h.Count, sm.Permits), Expires: h.Lease})
	}
	for i, w := range sm.Waiters {
		rows = append(rows, kinds.Row{Role: queued(i), Owner: w.Owner, Holds: fmt.Sprintf("%d/%d", sm.WaiterPermits[i], sm.Permits), Expires: w.Remaining})
	}
	return rows
}

func forceSema(c *Client, name string, st *inspect.State) []kinds.Release {
	sm := st.Semaphore
	if sm == nil || len(sm.Holders) == 0 {
		return nil
	}
	next := ""
	switch n := len(sm.Waiters); {
	case n == 1:
		next = "1 queued waiter may take the permits"
	case n > 1:
		next = fmt.Sprintf("%d queued waiters may take the permits, in their order", n)
	}
	// The capacity plays no part in a force release; Redis's is passed so
	// that the Semaphore is valid.
	return []kinds.Release{{Holders: sm.Holders, Unit: "permit", Next: next, Do: c.Semaphore(name, max(sm.Permits, 1)).ForceRelease}}
}

// CountDownLatch.

func decodeLatch(st *inspect.State, v []keyValue, _ int64) {
	st.CountDownLatch = latchInspect(v[0].key, fieldValue(v[0].fields, "n"))
}

func summarizeLatch(st *inspect.State) (inspect.Summary, bool) {
	if l := st.CountDownLatch; l != nil {
		return inspect.Summary{Count: l.Count}, true
	}
	return inspect.Summary{}, false
}

func latchChannels(ks keyspace, ch *inspect.Channels) { ch.Latch = ks.key("latch:ch") }

// latchRows: HOLDS is the count left; a latch has no owner and no lease.
func latchRows(st *inspect.State) []kinds.Row {
	if l := st.CountDownLatch; l != nil {
		return []kinds.Row{{Role: "closed", Owner: "-", Holds: strconv.Itoa(l.Count)}}
	}
	return nil
}

// forceLatch deletes a closed latch: opening it would tell its waiters that
// the work they wait for is done, so the command asks for it by name.
func forceLatch(c *Client, name string, st *inspect.State) []kinds.Release {
	if l := st.CountDownLatch; l != nil {
		return []kinds.Release{{Count: l.Count, Deletes: true, Do: c.CountDownLatch(name).Delete}}
	}
	return nil
}

// Shared by the rows above.

// exclusiveRows are the holder lines of a Lock or a FairLock.
func exclusiveRows(e inspect.Exclusive) []kinds.Row {
	var rows []kinds.Row
	for _, h := range e.Holders {
		rows = append(rows, kinds.Row{Role: "holder", Owner: h.Owner, Holds: strconv.Itoa(h.Count), Expires: h.Lease, Token: e.Token})
	}
	return rows
}

func queued(i int) string { return "queued #" + strconv.Itoa(i+1) }

// wokeFirst is what a force release of an exclusive lock does to its n
// queued waiters.
func wokeFirst(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("woke the first of %d queued waiters", n)
}
