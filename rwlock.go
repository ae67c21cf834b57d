package relock

import (
	"context"
	"fmt"
	"time"
)

// RWLock is Redisson's RReadWriteLock: new readers queue behind a waiting
// writer (a dead one: for the waiter timeout); a writer may downgrade.
type RWLock struct {
	base // Name and the queries' plumbing
	keys rwKeys
}

type rwKeys struct {
	hash, tail, readCh string // tail: the last write token and the latch (see release_common.lua)
	queue              string // the waiting writers' sorted set (see rw_common.lua)
	// waitChannel is where releases hand the write hold over to this
	// Client's waiting writers: <hash>:w:<client id> (see rw_common.lua).
	waitChannel string
	// The KEYS of the acquire and of the release (and abandon, force
	// release) scripts, boxed once: see keySet.
	acquireKeys, releaseKeys keySet
}

func rwKeysOf(ks keyspace) rwKeys {
	k := rwKeys{hash: ks.key("rw"), tail: ks.key("rw:last"),
		readCh: ks.key("rw:rch"), queue: ks.key("rw:q")}
	hash := any(k.hash)
	k.acquireKeys = keySet{[]string{k.hash, k.tail, k.readCh, k.queue}, hash}
	k.releaseKeys = keySet{[]string{k.hash, k.readCh, k.tail, k.queue}, hash}
	return k
}

// RWLock returns the read/write lock called name, as Client.Lock does.
func (c *Client) RWLock(name string) *RWLock {
	l := &RWLock{}
	if l.init(c, name) {
		l.keys = rwKeysOf(l.ks)
		l.keys.waitChannel = handOverChannel(l.keys.hash, c.id)
	}
	return l
}

// Key returns the Redis key of the lock's hash.
func (l *RWLock) Key() string { return l.keys.hash }

// ReadLock returns the shared side of the lock.
func (l *RWLock) ReadLock() *ReadLock { return &ReadLock{rwMode{l: l, kind: "r"}} }

// WriteLock returns the exclusive side of the lock.
func (l *RWLock) WriteLock() *WriteLock { return &WriteLock{rwMode{l: l, kind: "w"}} }

// ReadLock is the shared side of an RWLock; its methods are Lock's.
type ReadLock struct{ m rwMode }

// WriteLock is the exclusive side of an RWLock; its methods are Lock's.
type WriteLock struct{ m rwMode }

// Lock is Lock.Lock for a read hold, granted while no writer holds or waits.
func (r *ReadLock) Lock(ctx context.Context) (context.Context, error) { return r.m.lock(ctx) }

// TryLock is Lock.TryLock for a read hold.
func (r *ReadLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return r.m.tryLock(ctx, wait, lease)
}

// Unlock is Lock.Unlock for a read hold.
func (r *ReadLock) Unlock(ctx context.Context) error { return r.m.unlock(ctx) }

// ForceUnlock is Lock.ForceUnlock for every read hold; a write hold stays.
func (r *ReadLock) ForceUnlock(ctx context.Context) (bool, error) { return r.m.forceUnlock(ctx) }

// IsLocked reports whether any owner reads.
func (r *ReadLock) IsLocked(ctx context.Context) (bool, error) { return r.m.isLocked(ctx) }

// HoldCount returns how many read holds ctx's owner has.
func (r *ReadLock) HoldCount(ctx context.Context) (int, error) { return r.m.holdCount(ctx) }

// TTL returns the longest lease of the RWLock's holds (0: none).
func (r *ReadLock) TTL(ctx context.Context) (time.Duration, error) { return r.m.ttl(ctx) }

// Lock is Lock.Lock for the write hold; ErrUpgrade when ctx's owner reads.
func (w *WriteLock) Lock(ctx context.Context) (context.Context, error) { return w.m.lock(ctx) }

// TryLock is Lock.TryLock for the write hold.
func (w *WriteLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return w.m.tryLock(ctx, wait, lease)
}

// Unlock is Lock.Unlock for the write hold; read holds stay.
func (w *WriteLock) Unlock(ctx context.Context) error { return w.m.unlock(ctx) }

// ForceUnlock is Lock.ForceUnlock for the write hold; read holds stay.
func (w *WriteLock) ForceUnlock(ctx context.Context) (bool, error) { return w.m.forceUnlock(ctx) }

// IsLocked reports whether an owner writes.
func (w *WriteLock) IsLocked(ctx context.Context) (bool, error) { return w.m.isLocked(ctx) }

// HoldCount returns how many write holds ctx's owner has.
func (w *WriteLock) HoldCount(ctx context.Context) (int, error) { return w.m.holdCount(ctx) }

// TTL is ReadLock.TTL.
func (w *WriteLock) TTL(ctx context.Context) (time.Duration, error) { return w.m.ttl(ctx) }

// Token is Lock.Token for the write hold (read holds have none).
func (w *WriteLock) Token(ctx context.Context) (int64, error) {
	return w.m.l.token(ctx, w.m)
}

// rwMode is one side of an RWLock ("r" or "w"): the scheme of its holds and
// the body of its methods. The sides differ in their traits: writers queue
// in a sorted set beside the lock's hash and are handed the write hold by the release that frees
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
	return m.l.forceUnlock(ctx, ForceGuard{}, m.holdID(), rwForceReleaseCall(m.l.c, m.l.keys, m.kind, ForceGuard{}))
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
	res, err := queryBounded(m.l.c, ctx, "state", func() ([]int64, error) {
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
	a, err := l.c.runAcquire(ctx, call, channel, refusedUpgrade)
	if a.outcome == busy && m.kind == "w" {
		// The next attempt renews the writer's claim: it must come before
		// the claim lapses.
		a.retryIn = l.c.refreshWithin(a.retryIn)
	}
	return a, err
}

func (m rwMode) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	l := m.l
	return l.c.runRelease(ctx, rwReleaseCall(l.c, l.keys, m.kind, r))
}

// refusedUpgrade reads the reply by which the write acquire script refuses
// an owner that holds a read hold (see runAcquire).
func refusedUpgrade(status, _ int64) error {
	if status == -2 {
		return ErrUpgrade
	}
	return nil
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
func (q rwWriters) leave(ctx context.Context, owner, waiter string, lease time.Duration) {
	q.l.c.leaveQueue(ctx, rwAbandonCall(q.l.c, q.l.keys, owner, waiter, lease))
}
