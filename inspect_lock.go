package relock

// The rows of Lock, FairLock and RWLock in the table of kinds (kinds.go):
// how Inspect decodes them, ListLocks summarizes them, and the relock
// command shows and force-releases them.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

func decodeLock(st *inspect.State, v []keyValue, _ int64) { st.Lock = heldExclusive(v[0]) }

func summarizeLock(st *inspect.State) (inspect.Summary, bool) { return lockView(st).summary() }

func lockChannels(ks keyspace, ch *inspect.Channels) {
	k := lockKeysOf(ks)
	ch.Lock, ch.LockHandOverPrefix = k.channel, handOverPrefix(k.hash)
}

func lockRows(st *inspect.State) []kinds.Row { return lockView(st).rows() }

func lockWatched(ch inspect.Channels) []string { return []string{ch.Lock} }

func lockListen(st *inspect.State) (string, string) { return lockView(st).listen() }

func forceLock(c *Client, name string, st *inspect.State) []kinds.Release {
	l := c.Lock(name)
	return lockView(st).force(l.ForceUnlock, l.ForceUnlockIf)
}

func lockView(st *inspect.State) exclusiveView {
	if l := st.Lock; l != nil {
		return exclusiveView{l, l.Queued}
	}
	return exclusiveView{}
}

// FairLock

func decodeFair(st *inspect.State, v []keyValue, _ int64) {
	fair := inspect.Fair{
		Exclusive: exclusiveState(v[0].key, v[0].fields, v[0].pttl),
		QueueKey:  v[1].key,
		Waiters:   queuedWaiters(sortedEntries(v[1].fields)),
	}
	if len(fair.Holders) > 0 || len(fair.Waiters) > 0 {
		st.FairLock = &fair
	}
}

func summarizeFair(st *inspect.State) (inspect.Summary, bool) { return fairView(st).summary() }

func fairChannels(ks keyspace, ch *inspect.Channels) {
	k := fairKeysOf(ks)
	ch.Fair, ch.FairHandOverPrefix = k.channel, handOverPrefix(k.hash)
}

func fairRows(st *inspect.State) []kinds.Row { return fairView(st).rows() }

func fairWatched(ch inspect.Channels) []string { return []string{ch.Fair} }

func fairListen(st *inspect.State) (string, string) { return fairView(st).listen() }

func forceFair(c *Client, name string, st *inspect.State) []kinds.Release {
	l := c.FairLock(name)
	return fairView(st).force(l.ForceUnlock, l.ForceUnlockIf)
}

func fairView(st *inspect.State) exclusiveView {
	if f := st.FairLock; f != nil {
		return exclusiveView{&f.Exclusive, f.Waiters}
	}
	return exclusiveView{}
}

// RWLock

func decodeRW(st *inspect.State, v []keyValue, nowMs int64) {
	st.RWLock = rwState(v[0].key, v[0].fields, v[1].fields, nowMs)
}

func summarizeRW(st *inspect.State) (inspect.Summary, bool) {
	rw := st.RWLock
	if rw == nil {
		return inspect.Summary{}, false
	}
	s := inspect.Summary{Waiters: len(rw.WritersWaiting), Token: rw.Token}
	if rw.Writer != nil {
		s.Owners = append(s.Owners, *rw.Writer)
	}
	s.Owners = append(s.Owners, rw.Readers...)
	for _, h := range s.Owners {
		s.Lease = max(s.Lease, h.Lease)
	}
	s.Holders = len(s.Owners)
	return s, true
}

func rwChannels(ks keyspace, ch *inspect.Channels) {
	k := rwKeysOf(ks)
	ch.RWRead, ch.RWHandOverPrefix = k.readCh, handOverPrefix(k.hash)
}

func rwRows(st *inspect.State) []kinds.Row {
	rw := st.RWLock
	if rw == nil {
		return nil
	}
	var rows []kinds.Row
	if h := rw.Writer; h != nil {
		rows = append(rows, kinds.Row{Role: "writer", Owner: h.Owner, Name: h.Name, Holds: strconv.Itoa(h.Count), Expires: h.Lease, Token: rw.Token, Wait: h.WaitsFor})
	}
	for _, h := range rw.Readers {
		rows = append(rows, kinds.Row{Role: "reader", Owner: h.Owner, Name: h.Name, Holds: strconv.Itoa(h.Count), Expires: h.Lease, Wait: h.WaitsFor})
	}
	for _, w := range rw.WritersWaiting {
		rows = append(rows, kinds.Row{Role: "writer waiting", Owner: w.Owner, Name: w.Name, Holds: "-", Expires: w.Remaining})
	}
	return rows
}

func rwWatched(ch inspect.Channels) []string { return []string{ch.RWRead} }

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
		w := c.RWLock(name).WriteLock()
		out = append(out, kinds.Release{Mode: "write", Holders: []inspect.Holder{*rw.Writer}, Unit: "hold", Do: w.ForceUnlock,
			Token: rw.Token, DoIf: guarded(w.ForceUnlockIf)})
	}
	if len(rw.Readers) > 0 {
		r := c.RWLock(name).ReadLock()
		out = append(out, kinds.Release{Mode: "read", Holders: rw.Readers, Unit: "hold", Do: r.ForceUnlock, DoIf: guarded(r.ForceUnlockIf)})
	}
	return out
}

// exclusiveView is what the relock command and ListLocks read of a Lock, a
// FairLock or a SpinLock in an inspect.State: its state (nil when nobody
// holds it or waits for it) and its queue.
type exclusiveView struct {
	lock  *inspect.Exclusive
	queue []inspect.Waiter
}

// heldExclusive decodes the hash of a Lock or a SpinLock: nil when nobody
// holds it.
func heldExclusive(v keyValue) *inspect.Exclusive {
	if ex := exclusiveState(v.key, v.fields, v.pttl); len(ex.Holders) > 0 {
		return &ex
	}
	return nil
}

func (v exclusiveView) summary() (inspect.Summary, bool) {
	if v.lock == nil {
		return inspect.Summary{}, false
	}
	return inspect.Summary{Holders: len(v.lock.Holders), Owners: v.lock.Holders, Waiters: len(v.queue), Lease: v.lock.Lease, Token: v.lock.Token}, true
}

func (v exclusiveView) rows() []kinds.Row {
	if v.lock == nil {
		return nil
	}
	rows := exclusiveRows(*v.lock)
	for i, w := range v.queue {
		rows = append(rows, kinds.Row{Role: queued(i), Owner: w.Owner, Name: w.Name, Holds: "-", Expires: w.Remaining})
	}
	return rows
}

// listen is the hash and field whose changes the relock command's watch
// waits for: the lock's hand-overs, while someone holds it.
func (v exclusiveView) listen() (string, string) {
	if v.lock == nil || len(v.lock.Holders) == 0 {
		return "", ""
	}
	return v.lock.Key, "~m"
}

// force is what a force-unlock frees, do and doIf being the lock's
// ForceUnlock and ForceUnlockIf.
func (v exclusiveView) force(do func(context.Context) (bool, error), doIf func(context.Context, ForceGuard) (bool, error)) []kinds.Release {
	if v.lock == nil || len(v.lock.Holders) == 0 {
		return nil
	}
	return []kinds.Release{{Holders: v.lock.Holders, Unit: "hold", Next: wokeFirst(len(v.queue)), Do: do,
		Token: v.lock.Token, DoIf: guarded(doIf)}}
}

// guarded is a ForceUnlockIf as the relock command's table calls it.
func guarded(doIf func(context.Context, ForceGuard) (bool, error)) func(context.Context, string, int64) (bool, error) {
	return func(ctx context.Context, owner string, token int64) (bool, error) {
		return doIf(ctx, ForceGuard{Owner: owner, Token: token})
	}
}

// exclusiveRows are the holder lines of a Lock or a FairLock.
func exclusiveRows(e inspect.Exclusive) []kinds.Row {
	var rows []kinds.Row
	for _, h := range e.Holders {
		rows = append(rows, kinds.Row{Role: "holder", Owner: h.Owner, Name: h.Name, Holds: strconv.Itoa(h.Count), Expires: h.Lease, Token: e.Token, Wait: h.WaitsFor})
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
