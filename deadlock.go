package relock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Deadlock detection (see WithDeadlockDetection and docs/internals.md).
//
// A waiter that has waited half the Client's delay publishes a wait
// record: the key <prefix>:{dl:<owner>}, a string naming the lock its owner
// waits for, with a lease it renews at every check. The key has a hash tag
// of its own, so each record sits in any slot and is read with one command:
// a chain of them crosses a Cluster's slots one hop at a time. The waiter
// then follows the chain in its sleep, from the holders of its own lock,
// through their records, to the holders of theirs, and so on (the search:
// deadlock_search.go). A record is trusted only while its lease runs and
// only for an owner that holds, in Redis, what the previous hop waits for;
// a deadlock found is read a second time, and only the same members, record
// for record, confirm it. Every member of a deadlock that finds it picks
// the same victim from the records alone: the wait that began last, the
// greater owner on a tie; only the victim gives up.

const (
	// deadlockMaxOwners bounds the waiting owners one pass follows.
	deadlockMaxOwners = 16
	// deadlockMaxReads bounds the Redis reads of one pass.
	deadlockMaxReads = 64
	// deadlockLeases is a record's lease in detection delays: it outlives
	// several renewals (every half delay) but not a waiter that is gone for
	// long.
	deadlockLeases = 2
	// researchAfter is how many delays a wait whose search found no cycle
	// waits before it searches again (see deadlockWatch.search).
	researchAfter = 8
)

// detectable reports whether waits for kind take part in detection.
func detectable(kind Kind) bool {
	switch kind {
	case KindLock, KindFairLock, KindReadLock, KindWriteLock, KindSemaphore:
		return true
	}
	return false
}

// A deadlockWatch is one wait's part in detection. It lives on the wait
// loop's stack; next is zero when the wait takes no part.
type deadlockWatch struct {
	c      *Client
	owner  string
	obs    observed
	start  time.Time // when the wait began
	until  time.Time // the wait's deadline (zero: none)
	next   time.Time // the next check
	failed int       // checks failed in a row: each doubles the next delay
	// search is when the next search for a cycle is due: a search that
	// finds none puts the next one researchAfter delays later, while the
	// record is still renewed every half-delay. A cycle's victim is its
	// youngest wait, whose first search comes half a delay after every
	// older member has published its record (see watchDeadlocks): the
	// older waits' searches rarely matter, and a search reads the whole
	// state of the lock waited for, which grows with its waiters.
	search time.Time
	id     string // the wait's id in its record ("" : no check yet)
	record string // the record published ("" : none yet)
}

// watchDeadlocks starts the detection of a wait that began at start: its
// first check, at half the Client's delay, publishes its record, and its
// first search comes at the delay. Every older member of a cycle has then
// published its record half a delay before the youngest, the victim,
// searches: a check that a loaded machine runs late still makes it in
// time, where a search that misses a record would find the cycle only
// researchAfter delays later.
func (c *Client) watchDeadlocks(spec waitSpec, start time.Time) deadlockWatch {
	after := c.opts.deadlockAfter
	if after == 0 || spec.owner == "" || spec.obs == nil {
		return deadlockWatch{}
	}
	return deadlockWatch{c: c, owner: spec.owner, obs: spec.obs, start: start, until: spec.deadline(start),
		next: start.Add(after / 2), search: start.Add(after)}
}

// cap cuts a sleep of d at the next check.
func (d *deadlockWatch) cap(sleep time.Duration) time.Duration {
	if d.next.IsZero() {
		return sleep
	}
	return max(min(sleep, time.Until(d.next)), 0)
}

// sleepEnd is when a sleep of d from now ends (zero when d takes no part:
// no clock read).
func (d *deadlockWatch) sleepEnd(sleep time.Duration) time.Time {
	if d.next.IsZero() {
		return time.Time{}
	}
	return time.Now().Add(sleep)
}

// due reports whether a check is due.
func (d *deadlockWatch) due() bool {
	return !d.next.IsZero() && !time.Now().Before(d.next)
}

// key is the record key of owner.
func (c *Client) deadlockKey(owner string) string {
	return c.opts.prefix + ":{dl:" + tagEscaper.Replace(owner) + "}"
}

// check publishes (or renews) the wait's record and follows its chain. It
// returns an error wrapping ErrDeadlock and ErrNotObtained when the wait is
// the victim of a confirmed cycle; a check that Redis fails, or that ctx
// cuts short, finds nothing (the next one tries again). It takes at most
// the delay, and ends with the wait's deadline.
func (d *deadlockWatch) check(ctx context.Context) error {
	c, after := d.c, d.c.opts.deadlockAfter
	d.next = time.Now().Add(after / 2)
	lock := d.obs.info()
	if !detectable(lock.Kind) {
		d.next = time.Time{}
		return nil
	}
	until := time.Now().Add(after)
	if !d.until.IsZero() && d.until.Before(until) {
		until = d.until
	}
	cctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	if d.id == "" {
		d.id = c.newOp()
	}
	self := waitRecord{owner: d.owner, id: d.id, start: d.start.UnixMilli(), lock: lock}
	value := self.encode()
	searching := !time.Now().Before(d.search)
	var stuck bool
	cycle, err := queryBounded(d.c, cctx, "deadlock check", func() (cycle []waitRecord, err error) {
		cycle, stuck, err = c.findCycle(cctx, self, value, searching)
		return cycle, err
	})
	d.record = value // published, or maybe: end deletes it either way
	if err != nil {
		// Redis is failing: back off (up to 8 delays), so that a wait
		// through an outage adds few requests to it.
		d.failed = min(d.failed+1, 4)
		d.next = time.Now().Add(after / 2 << d.failed)
		c.log.Debug("relock: deadlock check failed", "lock", lock.Name, "err", err)
		return nil
	}
	d.failed = 0
	if searching && !stuck {
		// A wait found deadlocked searches again at its next check: the
		// victim gives up within a delay, and what is left (a cycle that
		// overlapped the one broken, a wait stuck behind it) is found then.
		d.search = time.Now().Add(researchAfter * after)
	}
	if cycle == nil || victim(cycle) != self.id {
		return nil
	}
	names := c.cycleNames(ctx, self.owner, cycle)
	c.emitDeadlock(ctx, lock, cycle, names)
	return fmt.Errorf("%w: %w: %s", ErrNotObtained, ErrDeadlock, describeCycle(self.owner, cycle, names))
}

// findCycle renews self's record (value) and, when search, returns the
// confirmed deadlock whose victim self's wait may be (nil: none), and
// whether self's wait is deadlocked at all (see cycleSearch.run).
func (c *Client) findCycle(ctx context.Context, self waitRecord, value string, search bool) ([]waitRecord, bool, error) {
	lease := deadlockLeases * c.opts.deadlockAfter
	if _, err := request(c, "deadlock record", c.rdb.Set(ctx, c.deadlockKey(self.owner), value, lease).Result); err != nil || !search {
		return nil, false, err
	}
	first, stuck, err := newCycleSearch(c, ctx, self).run()
	if first == nil || err != nil {
		return nil, stuck, err
	}
	second, _, err := newCycleSearch(c, ctx, self).run()
	if err != nil || !sameCycle(first, second) {
		return nil, stuck, err
	}
	return second, stuck, nil
}

// end deletes the wait's record, if it published one, waiting at most
// cleanupGrace for Redis (the delete goes on in the background; the lease
// ends a record whose delete fails).
func (d *deadlockWatch) end() {
	if d.record == "" {
		return
	}
	c, key := d.c, d.c.deadlockKey(d.owner)
	d.record = ""
	_, _, _ = awaitBounded(context.Background(), time.Now().Add(cleanupGrace), func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.unlockTimeout)
		defer cancel()
		return request(c, "deadlock record", c.rdb.Del(ctx, key).Result)
	})
}

// A waitRecord is what one owner's record says: it waits for lock since
// start (Unix ms, its Client's clock), in the wait named id.
type waitRecord struct {
	owner string
	id    string
	start int64
	lock  LockInfo
}

// encode is the record's value: start, id, kind and name, NUL-separated
// (the name last: it may hold any byte).
func (r waitRecord) encode() string {
	return strconv.FormatInt(r.start, 10) + "\x00" + r.id + "\x00" + string(r.lock.Kind) + "\x00" + r.lock.Name
}

// parseWaitRecord reads owner's record value; false when it is not one.
func parseWaitRecord(owner, v string) (waitRecord, bool) {
	f := strings.SplitN(v, "\x00", 4)
	if len(f) != 4 {
		return waitRecord{}, false
	}
	start, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || !detectable(Kind(f[2])) {
		return waitRecord{}, false
	}
	return waitRecord{owner: owner, id: f[1], start: start, lock: LockInfo{Name: f[3], Kind: Kind(f[2])}}, true
}

// sameCycle reports whether two passes found the same cycle: the same
// waits (record ids) of the same owners.
func sameCycle(a, b []waitRecord) bool {
	if len(a) != len(b) {
		return false
	}
	for _, r := range a {
		if !slices.ContainsFunc(b, func(o waitRecord) bool { return o.owner == r.owner && o.id == r.id }) {
			return false
		}
	}
	return true
}

// victim is the id of the wait of the cycle that gives up: the one that
// began last, the greater owner on a tie. Every member computes it from
// the same records, so every member picks the same one.
func victim(cycle []waitRecord) string {
	v := cycle[0]
	for _, r := range cycle[1:] {
		if r.start > v.start || r.start == v.start && r.owner > v.owner {
			v = r
		}
	}
	return v.id
}

// describeCycle names the cycle's waits, self's first, each owner with its
// Client's name when names has it.
func describeCycle(self string, cycle []waitRecord, names map[string]string) string {
	var b strings.Builder
	b.WriteString("owner " + named(self, names) + " is the victim of a cycle:")
	for i, r := range cycle {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " owner %s waits for %s %q", named(r.owner, names), r.lock.Kind, r.lock.Name)
	}
	return b.String()
}
