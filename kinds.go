package relock

import (
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
	// channels sets its fields of Channels (nil: it announces nothing).
	channels func(ks keyspace, ch *inspect.Channels)
	// tool is what the relock command does with it (Table of
	// internal/kinds); its Releases is set from force.
	tool  kinds.Kind
	force func(c *Client, name string, st *inspect.State) []kinds.Release
}

// stateKey is one state key of a kind: its suffix after the name's tag
// (see keyspace.key) and its Redis type, "hash", "zset" or "string".
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
		tool:  kinds.Kind{Rows: lockRows, Listen: lockListen, Watched: lockWatched},
		force: forceLock},
	{typeName: "FairLock", view: inspect.KindFairLock, events: []Kind{KindFairLock},
		state:  []stateKey{{"fair", "hash"}, {"fair:z", "zset"}},
		decode: decodeFair, summary: summarizeFair, channels: fairChannels,
		tool:  kinds.Kind{Rows: fairRows, Listen: fairListen, Watched: fairWatched},
		force: forceFair},
	{typeName: "RWLock", view: inspect.KindRWLock, events: []Kind{KindReadLock, KindWriteLock},
		state:  []stateKey{{"rw", "hash"}, {"rw:q", "zset"}},
		decode: decodeRW, summary: summarizeRW, channels: rwChannels,
		tool:  kinds.Kind{Rows: rwRows, Listen: rwListen, Watched: rwWatched},
		force: forceRW},
	{typeName: "MultiLock", events: []Kind{KindMultiLock}},
	{typeName: "RedLock", events: []Kind{KindRedLock}},
	{typeName: "Semaphore", view: inspect.KindSemaphore, events: []Kind{KindSemaphore},
		state:  []stateKey{{"sema", "hash"}, {"sema:d", "zset"}, {"sema:q", "zset"}, {"sema:c", "zset"}},
		decode: decodeSema, summary: summarizeSema, channels: semaChannels,
		tool:  kinds.Kind{Rows: semaRows},
		force: forceSema},
	{typeName: "CountDownLatch", view: inspect.KindCountDownLatch, events: []Kind{KindCountDownLatch},
		state:  []stateKey{{"latch", "hash"}},
		decode: decodeLatch, summary: summarizeLatch, channels: latchChannels,
		tool:  kinds.Kind{Rows: latchRows, Watched: latchWatched},
		force: forceLatch},
	{typeName: "SpinLock", view: inspect.KindSpinLock, events: []Kind{KindSpinLock},
		state:  []stateKey{{"spin", "hash"}},
		decode: decodeSpin, summary: summarizeSpin,
		tool:  kinds.Kind{Rows: spinRows},
		force: forceSpin},
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

// Kinds returns every Kind an event may carry, once each, in a fixed order.
func Kinds() []Kind {
	var out []Kind
	for _, k := range kindTable {
		out = append(out, k.events...)
	}
	return out
}
