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

// MultiLock holds several Locks as one: Lock takes all of them or none, Unlock
// releases all of them. The Locks may belong to different Clients, that is to
// different Redis deployments. Like Redisson's RedissonMultiLock, but it takes
// its parts in a fixed order, so two MultiLocks over overlapping sets of locks
// can never deadlock each other, and it never keeps a part while it waits for
// another.
//
// Each part is an ordinary hold of its Lock for the caller's owner: the part's
// own Client renews it (watchdog), Lock.Token reports its fencing token, and
// Lock.Lock with the MultiLock's context re-enters it. Parts of one Client
// (and, on a Redis Cluster, of one slot) are taken in one script call, so a
// MultiLock over ten locks of one Redis costs one round trip, not ten.
//
// A MultiLock value holds no state of its own and is safe to share between
// goroutines.
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

// NewMultiLock returns the MultiLock over locks. The same lock given twice
// (same Client and name) counts once. It sends nothing to Redis. No locks, a
// nil Lock or one with an invalid name do not panic: every method of the
// returned MultiLock then fails with ErrInvalidArgument.
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

// Locks returns the parts in the order they are acquired.
func (m *MultiLock) Locks() []*Lock { return slices.Clone(m.parts) }

// Lock blocks until every part is acquired or ctx ends, and returns the
// context of the hold, which is cancelled when the MultiLock is unlocked
// (cause ErrUnlocked) or when any part is lost (cause ErrLockLost: call
// Unlock anyway, to release the parts that are still held). Parts are held
// with their Clients' watchdog lease and renewed.
//
// On failure no part is held by ctx's owner beyond what it held before (see
// TryLock for the one exception). The error wraps ErrNotObtained and ctx.Err()
// when ctx ended first, ErrClientClosed when a part's Client closed, or a
// Redis error.
func (m *MultiLock) Lock(ctx context.Context) (context.Context, error) {
	return m.TryLock(ctx, WaitForever, 0)
}

// TryLock tries to acquire every part for at most wait (0: a single attempt;
// WaitForever: until ctx ends) and returns the context of the hold. With
// lease > 0 every part expires by itself after lease, and the hold's context
// is cancelled with ErrLockLost when the first does; with lease 0 the parts'
// watchdogs keep them.
//
// Parts are taken in the MultiLock's fixed order, several per script call
// where they share a Client (and slot). When one is held by another owner,
// the parts taken so far are released again before TryLock sleeps until that
// part is freed or returns, so a waiting MultiLock blocks nobody. If that
// release itself fails (its Redis unreachable), the error is returned and the
// parts concerned stay held until their lease runs out.
//
// When wait ends first, the error wraps ErrNotObtained. Negative or absurd
// durations return ErrInvalidArgument and send nothing.
func (m *MultiLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	if m.err != nil {
		return ctx, m.err
	}
	for _, g := range m.groups {
		if err := g.c.usable(); err != nil {
			return ctx, err
		}
	}
	if err := checkLockArgs(ctx, wait, lease); err != nil {
		return ctx, err
	}
	parent, o := withNewOwner(ctx)
	holds, release, err := m.enter(ctx, o, true)
	if err != nil {
		return ctx, err
	}
	defer release()

	gens := make([]string, len(m.parts))
	reentry := true
	for i, p := range m.parts {
		gens[i] = p.c.holds.generation(holds[i])
		reentry = reentry && gens[i] != ""
	}
	// Scripts run detached from ctx, as in lockWith.
	dctx := context.WithoutCancel(ctx)
	var started time.Time
	var tokens []int64
	var granted []string // per part: the generation it holds after the attempt
	try := func() (attempt, error) {
		started = time.Now()
		var a attempt
		var err error
		tokens, granted, a, err = m.acquire(dctx, o, holds, gens, lease)
		return a, err
	}
	var a attempt
	if reentry {
		a, err = try() // re-entry never waits
	} else {
		a, _, err = m.groups[0].c.wait(ctx, wait, "", try)
	}
	if err != nil {
		return ctx, err
	}
	if a.outcome != acquired {
		return ctx, fmt.Errorf("relock: multilock: unexpected acquire outcome %d", a.outcome)
	}
	// One context per part, each derived from the previous one: the last is
	// cancelled as soon as any part's hold ends, with that part's cause, and
	// carries one entry per part, which Unlock ends.
	hctx := parent
	for i, p := range m.parts {
		hctx = p.c.grant(holds[i], hctx, granted[i], tokens[i], lease, started)
	}
	return hctx, nil
}

// enter registers the caller as a user of every part's hold record and takes
// their semaphores in the MultiLock's order (so two goroutines of one owner
// cannot deadlock on them). With cancellable, it gives up when ctx ends.
func (m *MultiLock) enter(ctx context.Context, o *owner, cancellable bool) ([]*hold, func(), error) {
	holds := make([]*hold, len(m.parts))
	for i, p := range m.parts {
		holds[i] = p.c.holds.enter(lockScheme{p}, o.field(p.c))
	}
	release, err := m.takeSems(ctx, holds, cancellable)
	return holds, release, err
}

// takeSems takes the semaphores of holds in order and returns the func that
// gives them back and ends the caller's use of the records.
func (m *MultiLock) takeSems(ctx context.Context, holds []*hold, cancellable bool) (func(), error) {
	taken := 0
	release := func() {
		for i := taken - 1; i >= 0; i-- {
			<-holds[i].sem
		}
		for i, p := range m.parts {
			p.c.holds.exit(holds[i])
		}
	}
	for _, h := range holds {
		if !cancellable {
			h.sem <- struct{}{}
			taken++
			continue
		}
		select {
		case h.sem <- struct{}{}:
			taken++
		case <-ctx.Done():
			release()
			return nil, notObtained(ctx)
		}
	}
	return release, nil
}

// acquire is one attempt: every group in order, each in one script call. On
// anything but success it releases the groups it took and says why. It
// returns each part's token and generation.
func (m *MultiLock) acquire(ctx context.Context, o *owner, holds []*hold, gens []string, lease time.Duration) ([]int64, []string, attempt, error) {
	tokens := make([]int64, len(m.parts))
	granted := make([]string, len(m.parts))
	for gi, g := range m.groups {
		if err := g.c.usable(); err != nil {
			return nil, nil, attempt{}, m.rollback(ctx, o, gi, gens, granted, err)
		}
		op := g.c.newOp()
		res, err := m.acquireGroup(ctx, g, o.field(g.c), op, gens, leaseOf(g.c, lease))
		if err != nil {
			if outcomeUnknown(err) {
				m.cleanUp(g, o, op, gens, leaseOf(g.c, lease))
			}
			return nil, nil, attempt{}, m.rollback(ctx, o, gi, gens, granted, err)
		}
		switch res[0] {
		case 1:
			for j, i := range g.parts {
				tokens[i], granted[i] = res[1+j], cmp.Or(gens[i], op)
			}
			continue
		case 0:
			p := m.parts[g.parts[res[1]-1]]
			a := attempt{outcome: busy, retryIn: leaseLeft(res[2]), channel: p.keys.channel}
			a.subs = p.c.subs
			return nil, nil, a, m.rollback(ctx, o, gi, gens, granted, nil)
		}
		i := g.parts[res[1]-1]
		p := m.parts[i]
		err = fmt.Errorf("%w: multilock part %q: the hold was gone when the owner re-entered", ErrLockLost, p.Name())
		p.c.end(holds[i], gens[i], err)
		return nil, nil, attempt{}, m.rollback(ctx, o, gi, gens, granted, err)
	}
	return tokens, granted, attempt{outcome: acquired}, nil
}

func leaseOf(c *Client, lease time.Duration) time.Duration {
	if lease == 0 {
		return c.opts.watchdogLease
	}
	return lease
}

// cleanUp frees, in the background, the new parts of a group call whose
// outcome is unknown: they may be held with nobody to use them.
func (m *MultiLock) cleanUp(g multiGroup, o *owner, op string, gens []string, lease time.Duration) {
	for _, i := range g.parts {
		if gens[i] == "" {
			p := m.parts[i]
			g.c.releaseInBackground(lockScheme{p}, releaseReq{o.field(g.c), g.c.newOp(), op, true}, time.Now().Add(lease))
		}
	}
}

func (m *MultiLock) acquireGroup(ctx context.Context, g multiGroup, field, op string, gens []string, lease time.Duration) ([]int64, error) {
	ks := make([]lockKeys, len(g.parts))
	held := make([]string, len(g.parts))
	for j, i := range g.parts {
		ks[j], held[j] = m.parts[i].keys, gens[i]
	}
	res, err := multiAcquireCall(g.c, ks, held, field, op, lease).run(ctx, g.c.rdb).Int64Slice()
	if err != nil {
		return nil, wrapRedis("multilock acquire", err)
	}
	if want := 1 + len(g.parts); (res[0] == 1 && len(res) != want) || (res[0] != 1 && len(res) != 3) ||
		(res[0] != 1 && (res[1] < 1 || int(res[1]) > len(g.parts))) {
		return nil, fmt.Errorf("relock: multilock acquire script returned %v", res)
	}
	return res, nil
}

// rollback releases what this attempt took on groups before upto — a new
// part is freed, a re-entered one loses the hold just added — and returns
// cause joined with any failure to do so.
func (m *MultiLock) rollback(ctx context.Context, o *owner, upto int, gens, granted []string, cause error) error {
	errs := []error{cause}
	for _, g := range m.groups[:upto] {
		parts := make([]multiPart, len(g.parts))
		for j, i := range g.parts {
			parts[j] = multiPart{i: i, gen: granted[i], final: gens[i] == ""}
		}
		out, err := m.releaseGroup(ctx, g, o.field(g.c), g.c.newOp(), parts)
		if err != nil {
			errs = append(errs, fmt.Errorf("relock: multilock: releasing the parts taken before: %w", err))
			continue
		}
		for j, r := range out {
			if r == notHeld {
				errs = append(errs, fmt.Errorf("%w: multilock part %q vanished while the others were taken", ErrLockLost, m.parts[g.parts[j]].Name()))
			}
		}
	}
	return errors.Join(errs...)
}

// multiPart is one part's share of a group release.
type multiPart struct {
	i     int
	gen   string
	final bool
}

func (m *MultiLock) releaseGroup(ctx context.Context, g multiGroup, field, op string, parts []multiPart) ([]releaseOutcome, error) {
	c := g.c
	ks := make([]lockKeys, len(parts))
	gens := make([]string, len(parts))
	final := make([]bool, len(parts))
	for j, pt := range parts {
		ks[j], gens[j], final[j] = m.parts[pt.i].keys, pt.gen, pt.final
	}
	res, err := multiReleaseCall(c, ks, gens, final, field, op).run(ctx, c.rdb).Int64Slice()
	if err != nil {
		return nil, wrapRedis("multilock release", err)
	}
	if len(res) != len(parts) {
		return nil, fmt.Errorf("relock: multilock release script returned %d values, want %d", len(res), len(parts))
	}
	out := make([]releaseOutcome, len(res))
	for j, n := range res {
		if out[j], err = parseRelease(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Unlock ends the hold of ctx — the context a MultiLock.Lock returned — on
// every part, several per script call where they share a Client (and slot).
// It works with a cancelled ctx, since it must not leak the locks. Holds of
// the parts that ctx's owner took otherwise (a Lock of a part) are not
// touched.
//
// It releases every part it can even when others fail, and returns all the
// failures joined (errors.Join), each naming its part: ErrLockLost for a part
// that was lost before Unlock, or the error of a part's deployment (that
// release is retried in the background until the part's lease ends, see
// Lock.Unlock). When ctx holds no part at all — it is not a MultiLock hold
// context, or it was unlocked already — it returns ErrNotHeld, changing
// nothing.
func (m *MultiLock) Unlock(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	for _, g := range m.groups {
		if g.c.err != nil {
			return g.c.err
		}
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	o := ownerFrom(ctx)
	if o == nil {
		return fmt.Errorf("%w: the context carries no owner; pass the context Lock returned", ErrNotHeld)
	}
	entries := make([]*entry, len(m.parts))
	holds := make([]*hold, len(m.parts))
	for i, p := range m.parts {
		e := entryFrom(ctx, p.c, p.keys.hash)
		if e == nil || e.h.key.owner != o.field(p.c) {
			return fmt.Errorf("%w: the context is not a hold context of this MultiLock", ErrNotHeld)
		}
		entries[i], holds[i] = e, e.h
	}
	// Counted as a user only once every part is found: an early return
	// above must leave no record pinned.
	for i, p := range m.parts {
		p.c.holds.use(holds[i])
	}
	release, _ := m.takeSems(ctx, holds, false)
	defer release()
	return m.releaseEntries(context.WithoutCancel(ctx), o, entries)
}

// releaseEntries ends one entry per part, group by group.
func (m *MultiLock) releaseEntries(ctx context.Context, o *owner, entries []*entry) error {
	var errs []error
	partErr := func(i int, err error) {
		errs = append(errs, fmt.Errorf("multilock part %q: %w", m.parts[i].Name(), err))
	}
	live := 0
	for _, g := range m.groups {
		var parts []multiPart
		for _, i := range g.parts {
			e := entries[i]
			g.c.holds.mu.Lock()
			if e.ended != nil {
				if lost(e.ended) {
					partErr(i, e.ended)
				}
			} else {
				final := len(e.h.entries) == 1
				e.h.releasing = final
				parts = append(parts, multiPart{i: i, gen: e.gen, final: final})
			}
			g.c.holds.mu.Unlock()
		}
		if len(parts) == 0 {
			continue
		}
		live += len(parts)
		op := g.c.newOp()
		out, err := m.releaseGroup(ctx, g, o.field(g.c), op, parts)
		for j, pt := range parts {
			e, c := entries[pt.i], g.c
			switch {
			case err != nil:
				c.unlockFailed(e, releaseReq{e.h.key.owner, op, pt.gen, pt.final}, e.h.expiresAt)
				partErr(pt.i, err)
			case out[j] == released:
				c.end(e.h, pt.gen, ErrUnlocked)
			case out[j] == stillHeld:
				c.holds.mu.Lock()
				c.endEntryLocked(e, ErrUnlocked)
				c.holds.mu.Unlock()
			default:
				cause := fmt.Errorf("%w: the hold was gone when Unlock ran", ErrLockLost)
				c.end(e.h, pt.gen, cause)
				partErr(pt.i, cause)
			}
		}
	}
	if live == 0 && len(errs) == 0 {
		return ErrNotHeld
	}
	return errors.Join(errs...)
}
