package relock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MultiLock holds Locks, of any Clients, all or none; it never deadlocks.
type MultiLock struct {
	parts  []*Lock      // sorted, without duplicates
	groups []multiGroup // runs of parts taken in one script call, in order
	err    error
}

// multiGroup is a run of parts of one Client that one script call can reach.
type multiGroup struct {
	c     *Client
	parts []int // indexes into MultiLock.parts
}

// NewMultiLock returns the MultiLock over locks (one given twice counts once).
func NewMultiLock(locks ...*Lock) *MultiLock {
	m := &MultiLock{}
	if len(locks) == 0 {
		m.err = fmt.Errorf("%w: a MultiLock needs at least one lock", ErrInvalidArgument)
		return m
	}
	for i, l := range locks {
		switch {
		case l == nil || l.c == nil:
			m.err = fmt.Errorf("%w: lock %d of the MultiLock is nil", ErrInvalidArgument, i)
			return m
		case l.err != nil:
			m.err = fmt.Errorf("lock %d of the MultiLock: %w", i, l.err)
			return m
		}
	}
	// The order is the same in every process (deployment, then key), so the
	// MultiLocks of different processes contend for their first common part
	// instead of each grabbing a different one and backing off in turns.
	// Within one deployment, a part of a second Client in the same process
	// orders by the Client's id, which is enough: no part is kept while
	// waiting, so an order that differs between processes costs retries,
	// never a deadlock.
	type sortKey struct {
		deployment, client string
		slot               int
		key                string
	}
	keyOf := func(l *Lock) sortKey {
		k := sortKey{deployment: deploymentID(l.c.rdb), client: l.c.id, key: l.keys.hash}
		if l.c.isCluster() {
			k.slot = slotOf(l.keys.hash)
		}
		return k
	}
	parts := slices.Clone(locks)
	slices.SortFunc(parts, func(a, b *Lock) int {
		ka, kb := keyOf(a), keyOf(b)
		return cmp.Or(cmp.Compare(ka.deployment, kb.deployment), cmp.Compare(ka.client, kb.client),
			cmp.Compare(ka.slot, kb.slot), cmp.Compare(ka.key, kb.key))
	})
	parts = slices.CompactFunc(parts, func(a, b *Lock) bool { return a.c == b.c && a.keys.hash == b.keys.hash })
	m.parts = parts
	for i, l := range parts {
		if n := len(m.groups); n > 0 {
			g := &m.groups[n-1]
			last := parts[g.parts[0]]
			if g.c == l.c && (!l.c.isCluster() || slotOf(last.keys.hash) == slotOf(l.keys.hash)) {
				g.parts = append(g.parts, i)
				continue
			}
		}
		m.groups = append(m.groups, multiGroup{c: l.c, parts: []int{i}})
	}
	return m
}

// deploymentID names the Redis deployment rdb talks to, the same way in every
// process that addresses it the same way.
func deploymentID(rdb redis.UniversalClient) string {
	switch r := rdb.(type) {
	case *redis.Client:
		o := r.Options()
		return o.Addr + "/" + strconv.Itoa(o.DB)
	case *redis.ClusterClient:
		addrs := slices.Clone(r.Options().Addrs)
		slices.Sort(addrs)
		return "cluster:" + strings.Join(addrs, ",")
	}
	return fmt.Sprintf("%T:%p", rdb, rdb)
}

// Lock is Lock.Lock for every part; its context ends when any part is lost.
func (m *MultiLock) Lock(ctx context.Context) (context.Context, error) {
	return m.TryLock(ctx, WaitForever, 0)
}

// TryLock is Lock.TryLock for every part, releasing what it took to wait.
func (m *MultiLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	if m.err != nil {
		return ctx, m.err
	}
	return lockWith(ctx, multiTarget{m}, wait, lease)
}

// Unlock is Lock.Unlock for every part of ctx's hold (errors.Join).
func (m *MultiLock) Unlock(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	return unlockWith(ctx, multiTarget{m})
}

// multiTarget runs a MultiLock's scripts, group by group. It is a target,
// not a scheme: each part is an ordinary hold of its Lock, which the engine
// keeps in the Lock's Client (renewed, reported and ended as any Lock
// hold); the call's parts are the MultiLock's, in its order.
type multiTarget struct{ m *MultiLock }

// client is where a MultiLock waits: its first group's Client.
func (t multiTarget) client() *Client { return t.m.groups[0].c }

func (t multiTarget) info() LockInfo {
	names := make([]string, len(t.m.parts))
	for i, p := range t.m.parts {
		names[i] = p.Name()
	}
	return LockInfo{Name: strings.Join(names, ","), Kind: KindMultiLock}
}

// traits are the common case's: a MultiLock's waiters do not queue (no
// part could hand it the others), and its parts are plain Locks.
func (multiTarget) traits() traits { return traits{} }

func (t multiTarget) partCount() int      { return len(t.m.parts) }
func (t multiTarget) record(i int) scheme { return lockScheme{t.m.parts[i]} }

// takeBack rolls back every group of a grant nobody will use; its
// failures go to the background.
func (t multiTarget) takeBack(ctx context.Context, req acquireReq, parts []lockPart, a attempt) {
	_ = t.rollback(ctx, parts, a.grants, len(t.m.groups), req.lease, nil)
}

// leftover takes a grant back at once: a retry takes every group under a
// new op. An attempt of unknown outcome left nothing: it freed its parts
// itself (cleanUp, rollback).
func (t multiTarget) leftover(ctx context.Context, req acquireReq, parts []lockPart, _ string, a attempt, err error) string {
	if err == nil && a.outcome == acquired {
		t.takeBack(ctx, req, parts, a)
	}
	return ""
}

// acquireParts is one attempt: every group in order, each in one script
// call. On anything but success it releases the groups it took and says
// why; on success the attempt has each part's generation and token, and
// why a group's grant did not reach its Client's replicas (WithReplicas).
func (t multiTarget) acquireParts(ctx context.Context, r acquireReq, parts []lockPart) (attempt, error) {
	m := t.m
	grants := make([]partGrant, len(parts))
	var unreplicated []error
	for gi, g := range m.groups {
		if err := g.c.usable(); err != nil {
			return attempt{}, t.rollback(ctx, parts, grants, gi, r.lease, err)
		}
		op, lease := g.c.newOp(), g.c.leaseFor(r.lease)
		res, repl, err := t.acquireGroup(ctx, g, parts, op, lease)
		if err != nil {
			if outcomeUnknown(err) {
				t.cleanUp(g, parts, op, lease)
			}
			return attempt{}, t.rollback(ctx, parts, grants, gi, r.lease, err)
		}
		if res[0] == 1 {
			for j, i := range g.parts {
				grants[i] = partGrant{gen: cmp.Or(parts[i].held, op), token: res[1+j]}
			}
			if repl != nil {
				unreplicated = append(unreplicated, repl)
			}
			continue
		}
		i := g.parts[res[1]-1]
		l, p := m.parts[i], parts[i]
		if res[0] == 0 {
			a := attempt{outcome: busy, retryIn: leaseLeft(res[2]), channel: l.keys.channel, subs: l.c.subs}
			return a, t.rollback(ctx, parts, grants, gi, r.lease, nil)
		}
		err = fmt.Errorf("%w: multilock part %q: the hold was gone when the owner re-entered", ErrLockLost, l.Name())
		l.c.end(p.h, p.held, err)
		return attempt{}, t.rollback(ctx, parts, grants, gi, r.lease, err)
	}
	// A group whose grant did not reach its Client's replicas fails the
	// whole grant, which the engine then takes back (as for a Lock): the
	// groups after it are still taken, so that the take-back finds every
	// part's generation.
	return attempt{outcome: acquired, grants: grants, replication: errors.Join(unreplicated...)}, nil
}

// cleanUp frees, in the background, the new parts of a group call whose
// outcome is unknown: they may be held with nobody to use them.
func (t multiTarget) cleanUp(g multiGroup, parts []lockPart, op string, lease time.Duration) {
	for _, i := range g.parts {
		if p := parts[i]; p.held == "" {
			req := releaseReq{owner: p.h.key.owner, op: g.c.newOp(), gen: op, final: true, void: true}
			g.c.releaseInBackground(lockScheme{t.m.parts[i]}, req, time.Now().Add(lease))
		}
	}
}

// freeInBackground frees, in the background, the new parts of group g that
// this attempt took (grants says their generation) and could not release: a
// release by generation, which nothing later can match.
func (t multiTarget) freeInBackground(g multiGroup, parts []lockPart, grants []partGrant, lease time.Duration) {
	until := time.Now().Add(g.c.leaseFor(lease))
	for _, i := range g.parts {
		if p := parts[i]; p.held == "" && grants[i].gen != "" {
			req := releaseReq{owner: p.h.key.owner, op: g.c.newOp(), gen: grants[i].gen, final: true}
			g.c.releaseInBackground(lockScheme{t.m.parts[i]}, req, until)
		}
	}
}

// acquireGroup runs group g's acquire script and returns its reply and,
// when g's Client asks for WithReplicas and the script granted, why the
// grant did not reach the replicas (nil: it did).
func (t multiTarget) acquireGroup(ctx context.Context, g multiGroup, parts []lockPart, op string, lease time.Duration) (res []int64, repl, err error) {
	ks := make([]lockKeys, len(g.parts))
	held := make([]string, len(g.parts))
	for j, i := range g.parts {
		ks[j], held[j] = t.m.parts[i].keys, parts[i].held
	}
	owner := parts[g.parts[0]].h.key.owner
	r, repl := g.c.evalReplicated(ctx, "multilock acquire", multiAcquireCall(g.c, ks, held, owner, op, lease))
	if res, err = r.Int64Slice(); err != nil {
		return nil, nil, err
	}
	if want := 1 + len(g.parts); (res[0] == 1 && len(res) != want) || (res[0] != 1 && len(res) != 3) ||
		(res[0] != 1 && (res[1] < 1 || int(res[1]) > len(g.parts))) {
		return nil, nil, fmt.Errorf("relock: multilock acquire script returned %v", res)
	}
	if res[0] != 1 {
		repl = nil // a WAIT after a script that granted nothing says nothing
	}
	return res, repl, nil
}

// rollback releases what this attempt took (grants) on groups before upto
// — a new part is freed, a re-entered one loses the hold just added — and
// returns cause joined with any failure to do so. A group whose release
// fails has its new parts freed in the background (see
// Client.releaseInBackground) until their lease (as asked: 0 for the
// watchdog's) would have ended: a part nobody uses must not block the lock
// for a lease. A re-entered part keeps the hold just added, which only
// raises its count: the owner's last Unlock frees it whatever the count
// says.
func (t multiTarget) rollback(ctx context.Context, parts []lockPart, grants []partGrant, upto int, lease time.Duration, cause error) error {
	errs := []error{cause}
	for _, g := range t.m.groups[:upto] {
		gens := make([]string, len(g.parts))
		final := make([]bool, len(g.parts))
		for j, i := range g.parts {
			gens[j], final[j] = grants[i].gen, parts[i].held == ""
		}
		out, err := t.releaseGroup(ctx, g, parts[g.parts[0]].h.key.owner, g.c.newOp(), g.parts, gens, final)
		if err != nil {
			t.freeInBackground(g, parts, grants, lease)
			errs = append(errs, fmt.Errorf("relock: multilock: releasing the parts taken before (retried in the background): %w", err))
			continue
		}
		for j, r := range out {
			if r == notHeld {
				errs = append(errs, fmt.Errorf("%w: multilock part %q vanished while the others were taken", ErrLockLost, t.m.parts[g.parts[j]].Name()))
			}
		}
	}
	return errors.Join(errs...)
}

// releaseParts ends, group by group, one entry of each live part: it sets
// each one's op and outcome (or error).
func (t multiTarget) releaseParts(ctx context.Context, parts []unlockPart) {
	for _, g := range t.m.groups {
		var idx []int
		var gens []string
		var final []bool
		for _, i := range g.parts {
			if p := parts[i]; p.live {
				idx, gens, final = append(idx, i), append(gens, p.req.gen), append(final, p.req.final)
			}
		}
		if len(idx) == 0 {
			continue
		}
		op := g.c.newOp()
		out, err := t.releaseGroup(ctx, g, parts[idx[0]].req.owner, op, idx, gens, final)
		for j, i := range idx {
			p := &parts[i]
			p.req.op, p.err = op, err
			if err == nil {
				p.out = out[j]
			}
		}
	}
}

// unlockError joins the failures (errors.Join), each naming its part.
func (t multiTarget) unlockError(parts []unlockPart, fails []partFailure) error {
	errs := make([]error, len(fails))
	for i, f := range fails {
		errs[i] = fmt.Errorf("%s part %q: %w", KindMultiLock, parts[f.part].e.h.scheme.info().Name, f.err)
	}
	return errors.Join(errs...)
}

// releaseGroup releases one hold of owner on the parts idx of group g, of
// generations gens, the last one when final, in one script call.
func (t multiTarget) releaseGroup(ctx context.Context, g multiGroup, owner, op string, idx []int, gens []string, final []bool) ([]releaseOutcome, error) {
	ks := make([]lockKeys, len(idx))
	for j, i := range idx {
		ks[j] = t.m.parts[i].keys
	}
	res, err := g.c.eval(ctx, "multilock release", multiReleaseCall(g.c, ks, gens, final, owner, op)).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != len(idx) {
		return nil, fmt.Errorf("relock: multilock release script returned %d values, want %d", len(res), len(idx))
	}
	out := make([]releaseOutcome, len(res))
	for j, n := range res {
		if out[j], err = parseRelease(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}
