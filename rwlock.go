package relock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUpgrade is returned when an owner that holds a read lock asks for the
// write lock of the same RWLock. Waiting would deadlock — the write lock
// waits for every reader, this owner included — so the request fails at once
// and nothing changes. Release the read holds first, or take the write lock
// first and read under it (a writer may take read holds: downgrade).
var ErrUpgrade = errors.New("relock: the owner holds the read lock; it cannot take the write lock (no upgrade)")

// RWLock is a reentrant read/write lock shared by every process that uses the
// same name on the same Redis, like Redisson's RReadWriteLock: any number of
// owners may hold the read lock at once, or one owner the write lock. Both
// are reentrant per owner (the context, as for Lock) and each hold has the
// watchdog or its own explicit lease: a reader that dies stops keeping the
// lock busy when its own lease runs out, whatever the other readers do.
//
// Policy — writers first: once a writer waits, new readers queue behind it
// (owners that already read still re-enter, or they would deadlock with the
// writer). A steady stream of readers therefore cannot starve a writer; the
// price is that a steady stream of writers can delay readers. Waiting
// writers queue in Redis in arrival order, and each one's claim lives for
// the Client's waiter timeout (WithWaiterTimeout) unless its next attempt
// renews it (a waiting writer tries at least every third of it). So a writer
// that dies while waiting holds new readers up until the current holds end
// (the release skips it, below) or its claim lapses, whichever comes first:
// at most the waiter timeout.
//
// The owner of the write lock may take the read lock too, and then release
// the write lock (downgrade). As every hold context derives from the context
// passed to Lock, a read hold taken with the write hold's context is
// cancelled when the write hold ends; pass context.WithoutCancel(writeCtx),
// which keeps the owner, for a read hold that outlives it. The reverse — an
// owner that reads asking for the write lock — returns ErrUpgrade.
//
// Wake-up, as for Lock: the script that frees the lock — the last read
// unlock, the final write unlock, a ForceUnlock, a writer's abandon, or any
// script that evicts an expired last holder — hands the write hold, in the
// same call, to the first queued writer whose Client still listens, and
// publishes the grant on that Client's channel for the lock
// ("<prefix>:{name}:rw:w:<client id>"): the writer holds when the message
// arrives, with no further round trip, so one release wakes one writer in
// one process. A writer whose process died is skipped at once (its Client no
// longer listens); one frozen when granted keeps the lock for its lease, as
// a frozen holder would; with classic pub/sub on a Cluster the first live
// claim is granted listening or not. With no writer to hand it to, the
// waiting readers are woken all at once on the readers' channel; a write
// unlock that leaves read holds (downgrade) wakes them too, unless a writer
// waits. Nothing is published when nobody waits. A waiter whose holder died
// tries again when that holder's lease has run out (a writer at least every
// third of the waiter timeout).
//
// Keys: "<prefix>:{name}:rw" (every holder's count and deadline, the
// waiting writers' queue and whether readers wait), which disappears with
// its last holder; ":rw:last" (the tail: the last write token and the latch
// of the last final Unlocks), for the unlock latch (see WithUnlockLatch). An RWLock, a
// Lock and a FairLock of the same name are different locks.
type RWLock struct {
	base // Name and the queries' plumbing
	keys rwKeys
}

type rwKeys struct {
	hash, tail, readCh string // tail: the last write token and the latch (see release_common.lua)
	// waitChannel is where releases hand the write hold over to this
	// Client's waiting writers: <hash>:w:<client id> (see rw_common.lua).
	waitChannel string
	// The KEYS of the acquire and of the release (and abandon, force
	// release) scripts, boxed once: see keySet.
	acquireKeys, releaseKeys keySet
}

func rwKeysOf(ks keyspace) rwKeys {
	k := rwKeys{hash: ks.key("rw"), tail: ks.key("rw:last"),
		readCh: ks.key("rw:rch")}
	hash, tail, readCh := any(k.hash), any(k.tail), any(k.readCh)
	k.acquireKeys = keySet{[]string{k.hash, k.tail, k.readCh}, []any{hash, tail, readCh}}
	k.releaseKeys = keySet{[]string{k.hash, k.readCh, k.tail}, []any{hash, readCh, tail}}
	return k
}

// RWLock returns the read/write lock called name. It sends nothing to
// Redis. An empty or oversized name does not panic: every method of its read
// and write locks then fails with ErrInvalidArgument.
func (c *Client) RWLock(name string) *RWLock {
	l := &RWLock{}
	if l.init(c, name) {
		l.keys = rwKeysOf(l.ks)
		l.keys.waitChannel = l.keys.hash + ":w:" + c.id
	}
	return l
}

// Key returns the Redis key of the lock's hash.
func (l *RWLock) Key() string { return l.keys.hash }

// ReadLock returns the shared side of the lock.
func (l *RWLock) ReadLock() *ReadLock { return &ReadLock{rwMode{l: l, kind: "r"}} }

// WriteLock returns the exclusive side of the lock.
func (l *RWLock) WriteLock() *WriteLock { return &WriteLock{rwMode{l: l, kind: "w"}} }

// ReadLock is the shared side of an RWLock. Its methods work as Lock's; the
// differences are stated on each.
type ReadLock struct{ m rwMode }

// WriteLock is the exclusive side of an RWLock. Its methods work as Lock's;
// the differences are stated on each.
type WriteLock struct{ m rwMode }

// Lock blocks until a read hold is granted — no writer holds the lock and
// none waits, or ctx's owner already reads or writes — or ctx ends, and
// returns the hold's context, renewed by the watchdog. Errors are as for
// Lock.Lock.
func (r *ReadLock) Lock(ctx context.Context) (context.Context, error) { return r.m.lock(ctx) }

// TryLock is Lock.TryLock for a read hold.
func (r *ReadLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return r.m.tryLock(ctx, wait, lease)
}

// Unlock releases one read hold of ctx's owner. It returns ErrNotHeld,
// changing nothing, when ctx's owner has no read hold (holding the write
// lock does not count), and ErrLockLost when the hold was lost.
func (r *ReadLock) Unlock(ctx context.Context) error { return r.m.unlock(ctx) }

// ForceUnlock removes every read hold, whoever has it, and reports whether
// there was one. A write hold is left alone. This Client's read holds end
// at once (ErrLockLost); other processes learn it at their next renewal,
// Unlock or lease end.
func (r *ReadLock) ForceUnlock(ctx context.Context) (bool, error) { return r.m.forceUnlock(ctx) }

// IsLocked reports whether any owner holds a read hold.
func (r *ReadLock) IsLocked(ctx context.Context) (bool, error) { return r.m.isLocked(ctx) }

// HoldCount returns how many read holds ctx's owner has, as Redis sees it.
func (r *ReadLock) HoldCount(ctx context.Context) (int, error) { return r.m.holdCount(ctx) }

// HeldBy reports whether ctx's owner holds a read hold, as Redis sees it.
func (r *ReadLock) HeldBy(ctx context.Context) (bool, error) { return r.m.heldBy(ctx) }

// TTL returns the RWLock's remaining lease: that of its longest-lived hold,
// read or write (0 when nobody holds it).
func (r *ReadLock) TTL(ctx context.Context) (time.Duration, error) { return r.m.ttl(ctx) }

// Lock blocks until the write hold is granted — nobody else reads or writes
// — or ctx ends, and returns the hold's context, renewed by the watchdog.
// While it waits, new readers queue behind it. If ctx's owner holds a read
// hold it returns ErrUpgrade at once; other errors are as for Lock.Lock. A
// read hold of the owner that this Client took but no longer holds — left
// in Redis by a read Unlock whose release is still being retried in the
// background — is taken over, as Lock takes over an owner's own leftover,
// and is no upgrade. A read hold of the same WithOwner id taken by another
// Client counts as the owner's: ErrUpgrade.
func (w *WriteLock) Lock(ctx context.Context) (context.Context, error) { return w.m.lock(ctx) }

// TryLock is Lock.TryLock for the write hold, with ErrUpgrade as for Lock.
// When wait ends first the writer's claim is withdrawn, so readers it held
// back go on at once.
func (w *WriteLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return w.m.tryLock(ctx, wait, lease)
}

// Unlock releases one write hold of ctx's owner. It returns ErrNotHeld,
// changing nothing, when ctx's owner does not hold the write lock (a reader
// included), and ErrLockLost when the hold was lost. Read holds the owner
// took under the write lock stay (downgrade).
func (w *WriteLock) Unlock(ctx context.Context) error { return w.m.unlock(ctx) }

// ForceUnlock removes the write hold, whoever has it, and reports whether
// there was one. Read holds are left alone. The write hold it removed, if
// this Client has it, ends at once (ErrLockLost); one it hands over to a
// queued writer, of this Client or another, stays.
func (w *WriteLock) ForceUnlock(ctx context.Context) (bool, error) { return w.m.forceUnlock(ctx) }

// IsLocked reports whether an owner holds the write lock.
func (w *WriteLock) IsLocked(ctx context.Context) (bool, error) { return w.m.isLocked(ctx) }

// HoldCount returns how many write holds ctx's owner has, as Redis sees it.
func (w *WriteLock) HoldCount(ctx context.Context) (int, error) { return w.m.holdCount(ctx) }

// HeldBy reports whether ctx's owner holds the write lock, as Redis sees it.
func (w *WriteLock) HeldBy(ctx context.Context) (bool, error) { return w.m.heldBy(ctx) }

// TTL returns the RWLock's remaining lease, as ReadLock.TTL.
func (w *WriteLock) TTL(ctx context.Context) (time.Duration, error) { return w.m.ttl(ctx) }

// Token returns the fencing token of ctx's write hold, as Lock.Token does
// (read holds have none). It reports ErrNotHeld when ctx's owner holds no
// write hold of this Client.
func (w *WriteLock) Token(ctx context.Context) (int64, error) {
	return w.m.l.token(ctx, w.m)
}

// rwMode is one side of an RWLock ("r" or "w"): the scheme of its holds and
// the body of its methods. The sides differ in their traits: writers queue
// in the lock's hash and are handed the write hold by the release that frees
// the lock (see rw_common.lua); readers are all woken at once on the
// readers' channel.
type rwMode struct {
	l    *RWLock
	kind string
}

func (m rwMode) tryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return m.l.tryLock(ctx, soleOf(m), wait, lease)
}

func (m rwMode) lock(ctx context.Context) (context.Context, error) {
	return m.tryLock(ctx, WaitForever, 0)
}

func (m rwMode) unlock(ctx context.Context) error { return m.l.unlock(ctx, soleOf(m)) }

func (m rwMode) forceUnlock(ctx context.Context) (bool, error) {
	return m.l.forceUnlock(ctx, m.holdID(), rwForceReleaseCall(m.l.c, m.l.keys, m.kind))
}

// state runs rw_state: {readers, writer, owner's reads, owner's writes}.
func (m rwMode) state(ctx context.Context) ([]int64, error) {
	ctx, err := m.l.checkQuery(ctx)
	if err != nil {
		return nil, err
	}
	owner := ""
	if o := ownerFrom(ctx); o != nil {
		owner = o.field(m.l.c)
	}
	res, err := queryBounded(ctx, "state", func() ([]int64, error) {
		return m.l.c.eval(context.WithoutCancel(ctx), "state", rwStateCall(m.l.keys.hash, owner)).Int64Slice()
	})
	if err != nil {
		return nil, err
	}
	if len(res) != 4 {
		return nil, fmt.Errorf("relock: state script returned %d values, want 4", len(res))
	}
	return res, nil
}

func (m rwMode) isLocked(ctx context.Context) (bool, error) {
	st, err := m.state(ctx)
	if err != nil {
		return false, err
	}
	if m.kind == "r" {
		return st[0] > 0, nil
	}
	return st[1] > 0, nil
}

func (m rwMode) holdCount(ctx context.Context) (int, error) {
	st, err := m.state(ctx)
	if err != nil {
		return 0, err
	}
	if m.kind == "r" {
		return int(st[2]), nil
	}
	return int(st[3]), nil
}

func (m rwMode) heldBy(ctx context.Context) (bool, error) {
	n, err := m.holdCount(ctx)
	return n > 0, err
}

func (m rwMode) ttl(ctx context.Context) (time.Duration, error) { return m.l.pttl(ctx, m.l.keys.hash) }

// The scheme: read and write holds are separate records (distinct holdIDs),
// each with its own count, lease and watchdog item.

func (m rwMode) client() *Client { return m.l.c }
func (m rwMode) holdID() string  { return m.l.keys.hash + "#" + m.kind }

func (m rwMode) info() LockInfo {
	if m.kind == "r" {
		return LockInfo{Name: m.l.ks.name, Kind: KindReadLock}
	}
	return LockInfo{Name: m.l.ks.name, Kind: KindWriteLock}
}

func (m rwMode) acquire(ctx context.Context, r acquireReq) (attempt, error) {
	l := m.l
	k := l.keys
	call := rwReadAcquireCall(l.c, k, r)
	channel := k.readCh
	if m.kind == "w" {
		readID := l.ReadLock().m.holdID()
		if r.gen == "" {
			// Known locally: no round trip for the error.
			if gen, _, _ := l.c.holds.find(readID, r.owner); gen != "" {
				return attempt{}, ErrUpgrade
			}
		}
		// A read hold of the owner that this Client made but neither holds
		// nor is taking is a leftover (a failed Unlock's release still
		// retried in the background): the script takes it over rather than
		// refuse.
		reading := l.c.holds.tracked(readID, r.owner)
		call, channel = rwWriteAcquireCall(l.c, k, r, reading), k.waitChannel
	}
	var buf [4]int64 // the reply, on the stack
	res, repl, err := l.c.runAcquire(ctx, call, buf[:0])
	if err != nil {
		return attempt{}, err
	}
	if len(res) == 2 && res[0] == -2 {
		return attempt{}, ErrUpgrade
	}
	a, err := parseAcquire(res, channel)
	if a.outcome == acquired {
		a.replication = repl
	}
	if a.outcome == busy && m.kind == "w" {
		// The next attempt renews the writer's claim: it must come before
		// the claim lapses.
		a.retryIn = l.c.refreshWithin(a.retryIn)
	}
	return a, err
}

func (m rwMode) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	l := m.l
	n, err := l.c.eval(ctx, "release", rwReleaseCall(l.c, l.keys, m.kind, r)).Int64()
	if err != nil {
		return 0, err
	}
	return parseRelease(n)
}

func (m rwMode) renewal(owner, gen string, lease time.Duration) renewal {
	return renewal{call: rwRenewCall(m.l.keys.hash, m.kind, owner, gen, lease)}
}

// traits: the writers' queue for the write side. A waiting reader leaves
// nothing in Redis but a mark that some reader waits (~r), which costs at
// most one needless wake-up: the read side has no queue to leave.
func (m rwMode) traits() traits {
	if m.kind == "w" {
		return traits{queue: rwWriters{m.l}}
	}
	return traits{}
}

// rwWriters is the queue of an RWLock's waiting writers.
type rwWriters struct{ l *RWLock }

// channel is where this Client's waiting writers are handed the write hold.
func (q rwWriters) channel() string { return q.l.keys.waitChannel }

// leave takes a writer that gave up out of the queue (see
// Client.leaveQueue).
func (q rwWriters) leave(ctx context.Context, owner, waiter string) {
	q.l.c.leaveQueue(ctx, rwAbandonCall(q.l.c, q.l.keys, owner, waiter))
}
