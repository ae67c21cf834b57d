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
		return nil, m.err
	}
	for _, g := range m.groups {
		if err := g.c.usable(); err != nil {
			return nil, err
		}
	}
	if err := checkLockArgs(ctx, wait, lease); err != nil {
		return nil, err
	}
	parent, o := withNewOwner(ctx)
	holds, release, err := m.enter(ctx, o, true)
	if err != nil {
		return nil, err
	}
	defer release()

	held := make([]int, len(m.parts))
	reentry := true
	for i, p := range m.parts {
		held[i] = p.c.holds.held(holds[i])
		reentry = reentry && held[i] > 0
	}
	// Scripts run detached from ctx, as in lockWith.
	dctx := context.WithoutCancel(ctx)
	var started time.Time
	var tokens []int64
	try := func() (attempt, error) {
		started = time.Now()
		var a attempt
		var err error
		tokens, a, err = m.acquire(dctx, o, holds, held, lease)
		return a, err
	}
	var a attempt
	if reentry {
		a, err = try() // re-entry never waits
	} else {
		a, err = m.groups[0].c.wait(ctx, wait, "", try)
	}
	if err != nil {
		return nil, err
	}
	if a.outcome != acquired {
		return nil, fmt.Errorf("relock: multilock: unexpected acquire outcome %d", a.outcome)
	}
	// One context per part, each derived from the previous one: the last is
	// cancelled as soon as any part's hold ends, with that part's cause.
	hctx := parent
	for i, p := range m.parts {
		hctx = p.c.grant(holds[i], hctx, attempt{outcome: acquired, token: tokens[i]}, lease, started)
	}
	return hctx, nil
}

// enter registers the caller as a user of every part's hold record and takes
// their semaphores in the MultiLock's order (so two goroutines of one owner
// cannot deadlock on them). With cancellable, it gives up when ctx ends.
func (m *MultiLock) enter(ctx context.Context, o *owner, cancellable bool) ([]*hold, func(), error) {
	holds := make([]*hold, len(m.parts))
	taken := 0
	release := func() {
		for i := taken - 1; i >= 0; i-- {
			<-holds[i].sem
		}
		for i, p := range m.parts {
			if holds[i] != nil {
				p.c.holds.exit(holds[i])
			}
		}
	}
	for i, p := range m.parts {
		holds[i] = p.c.holds.enter(lockScheme{p}, o.field(p.c))
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
			return nil, nil, notObtained(ctx)
		}
	}
	return holds, release, nil
}

// acquire is one attempt: every group in order, each in one script call. On
// anything but success it releases the groups it took and says why.
func (m *MultiLock) acquire(ctx context.Context, o *owner, holds []*hold, held []int, lease time.Duration) ([]int64, attempt, error) {
	sendLease := lease
	tokens := make([]int64, len(m.parts))
	for gi := 0; gi < len(m.groups); gi++ {
		g := m.groups[gi]
		if err := g.c.usable(); err != nil {
			return nil, attempt{}, m.rollback(ctx, o, gi, held, err)
		}
		if lease == 0 {
			sendLease = g.c.opts.watchdogLease
		}
		res, err := m.acquireGroup(ctx, g, o.field(g.c), held, sendLease)
		if err != nil {
			return nil, attempt{}, m.rollback(ctx, o, gi, held, err)
		}
		switch res[0] {
		case 1:
			for j, i := range g.parts {
				tokens[i] = res[1+j]
			}
			continue
		case 0:
			p := m.parts[g.parts[res[1]-1]]
			a := attempt{outcome: busy, retryIn: time.Duration(res[2]) * time.Millisecond,
				channel: p.keys.channel, subs: p.c.subs}
			return nil, a, m.rollback(ctx, o, gi, held, nil)
		}
		i := g.parts[res[1]-1]
		p, count := m.parts[i], int(res[2])
		if held[i] == 0 && count > 0 {
			// Redis knows this owner on that part (a hold resumed with
			// WithOwner): adopt its count, as lockWith does, and try again.
			p.c.adopt(holds[i], count)
			held[i] = count
			gi--
			continue
		}
		err = fmt.Errorf("%w: multilock part %q: Redis has this owner's count at %d, not %d", ErrLockLost, p.Name(), count, held[i])
		p.c.end(holds[i], ErrLockLost)
		return nil, attempt{}, m.rollback(ctx, o, gi, held, err)
	}
	return tokens, attempt{outcome: acquired}, nil
}

func (m *MultiLock) acquireGroup(ctx context.Context, g multiGroup, field string, held []int, lease time.Duration) ([]int64, error) {
	keys := make([]string, 0, 2*len(g.parts))
	args := make([]any, 0, 3+len(g.parts))
	args = append(args, field, lease.Milliseconds(), g.c.fencingArg())
	for _, i := range g.parts {
		p := m.parts[i]
		keys = append(keys, p.keys.hash, p.keys.fence)
		args = append(args, held[i])
	}
	res, err := multiAcquireScript.Run(ctx, g.c.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, wrapRedis("multilock acquire", err)
	}
	if want := 1 + len(g.parts); (res[0] == 1 && len(res) != want) || (res[0] != 1 && len(res) != 3) ||
		(res[0] != 1 && (res[1] < 1 || int(res[1]) > len(g.parts))) {
		return nil, fmt.Errorf("relock: multilock acquire script returned %v", res)
	}
	return res, nil
}

// rollback releases the holds this attempt took on groups before upto (each
// part one below what it was acquired at) and returns cause joined with any
// failure to do so.
func (m *MultiLock) rollback(ctx context.Context, o *owner, upto int, held []int, cause error) error {
	errs := []error{cause}
	for _, g := range m.groups[:upto] {
		believed := make([]int, len(m.parts))
		for _, i := range g.parts {
			believed[i] = held[i] + 1
		}
		out, err := m.releaseGroup(ctx, g, o.field(g.c), g.parts, believed)
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

func (m *MultiLock) releaseGroup(ctx context.Context, g multiGroup, field string, parts []int, believed []int) ([]releaseOutcome, error) {
	c := g.c
	keys := make([]string, 0, 3*len(parts))
	args := make([]any, 0, 4+len(parts))
	args = append(args, field, c.publishCommand(), c.opts.unlockLatch.Milliseconds(), wakeOne)
	req := c.newRequestID()
	for _, i := range parts {
		p := m.parts[i]
		keys = append(keys, p.keys.hash, p.keys.channel, p.ks.key("latch:"+req))
		args = append(args, believed[i])
	}
	res, err := multiReleaseScript.Run(ctx, c.rdb, keys, args...).Int64Slice()
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

// Unlock releases one hold of ctx's owner on every part, several per script
// call where they share a Client (and slot). It works with a cancelled ctx,
// since it must not leak the locks.
//
// It releases every part it can even when others fail, and returns all the
// failures joined (errors.Join), each naming its part: ErrLockLost for a part
// that was lost before Unlock, ErrNotHeld for one ctx's owner did not hold, or
// the Redis error of a part's deployment (that part stays held until its
// lease runs out, or until Unlock is called again). When ctx's owner holds no
// part at all it returns ErrNotHeld, changing nothing.
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
	holds, release, _ := m.enter(ctx, o, false)
	defer release()

	var errs []error
	partErr := func(i int, err error) {
		errs = append(errs, fmt.Errorf("multilock part %q: %w", m.parts[i].Name(), err))
	}
	held := make([]int, len(m.parts))
	someHeld := false
	for i, p := range m.parts {
		held[i] = p.c.holds.held(holds[i])
		if held[i] == 0 {
			if cause := context.Cause(ctx); errors.Is(cause, ErrLockLost) {
				partErr(i, cause)
			} else {
				partErr(i, ErrNotHeld)
			}
			continue
		}
		someHeld = true
		if held[i] == 1 {
			p.c.setReleasing(holds[i], true)
		}
	}
	if !someHeld && !errors.Is(context.Cause(ctx), ErrLockLost) {
		return ErrNotHeld
	}
	dctx := context.WithoutCancel(ctx)
	for _, g := range m.groups {
		var parts []int
		for _, i := range g.parts {
			if held[i] > 0 {
				parts = append(parts, i)
			}
		}
		if len(parts) == 0 {
			continue
		}
		out, err := m.releaseGroup(dctx, g, o.field(g.c), parts, held)
		for j, i := range parts {
			h := holds[i]
			switch {
			case err != nil:
				g.c.setReleasing(h, false)
				partErr(i, err)
			case out[j] == released:
				g.c.end(h, ErrUnlocked)
			case out[j] == stillHeld:
				g.c.releaseOne(h)
			default:
				g.c.end(h, ErrLockLost)
				partErr(i, ErrLockLost)
			}
		}
	}
	return errors.Join(errs...)
}
