package relock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewBatch is the most holds one renewal script call carries; a tick sends
// all its calls in one pipeline (one per node on a Cluster).
const renewBatch = 500

// watchdog renews the lease of every hold taken without a lease time, for the
// whole Client, from one goroutine: every lease/3 it renews all of them in one
// pipeline of batched script calls. A hold the script finds gone is ended at
// once (its context cancelled with ErrLockLost). One whose renewals keep
// failing is ended by the Client's lease heap (leases.go) when the lease it
// last renewed runs out — even while a renewal hangs on an unresponsive server,
// since go-redis bounds calls by its read timeout, not by our deadlines.
type watchdog struct {
	c        *Client
	interval time.Duration
	retry    time.Duration

	// The holds it renews are those of the Client's registry marked
	// watched: a set of its own would cost memory per hold.
	mu      sync.Mutex
	started bool
	done    chan struct{}
	kicks   chan struct{} // a recheck of every hold is wanted now
	// stopped ends at Close: the renewals in flight are abandoned then,
	// as Close's bound abandons any other request (see close).
	stopped context.Context
	stop    context.CancelFunc

	// Counters for benchmarks and tests.
	ticks      atomic.Int64
	roundTrips atomic.Int64
	lastTick   atomic.Int64 // duration of the last tick, ns
}

func newWatchdog(c *Client) *watchdog {
	lease := c.opts.watchdogLease
	stopped, stop := context.WithCancel(context.Background())
	return &watchdog{
		c:        c,
		interval: lease / 3,
		retry:    max(lease/15, time.Millisecond),
		done:     make(chan struct{}),
		kicks:    make(chan struct{}, 1),
		stopped:  stopped,
		stop:     stop,
	}
}

// watch makes sure the watchdog runs, for a hold just marked watched.
// Called with the registry lock held.
func (d *watchdog) watch() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c.closed.Load() {
		return
	}
	d.startLocked()
}

func (d *watchdog) startLocked() {
	if !d.started {
		d.started = true
		go d.run()
	}
}

// kick asks for a check of every hold now (see Client.recheckHolds). It
// reports whether the request is new (not merged into a pending one).
func (d *watchdog) kick() bool {
	d.mu.Lock()
	if d.c.closed.Load() {
		d.mu.Unlock()
		return false
	}
	d.startLocked()
	d.mu.Unlock()
	select {
	case d.kicks <- struct{}{}:
		return true
	default:
		return false
	}
}

// close stops the watchdog for Close and waits until its goroutine has
// returned or until has passed, whichever is first. Close calls it after
// it has released its holds, and abandons the tick in flight, if any, as
// soon as it begins (abandon): the tick's requests end then where go-redis
// honours contexts (and their retries everywhere), and whatever their
// replies say once they come is dropped (apply), so a renewal that hangs
// on a paused server holds Close no longer than any other request.
func (d *watchdog) close(until time.Time) {
	d.mu.Lock()
	started := d.started
	d.started = true // no goroutine may start after Close
	d.mu.Unlock()
	d.stop()
	if !started {
		return
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-d.done:
	case <-t.C:
	}
}

// abandon ends the context of the tick in flight, if any, and of every
// later one: Close begins.
func (d *watchdog) abandon() { d.stop() }

func (d *watchdog) run() {
	defer close(d.done)
	// The timer runs even while nothing is watched. Waking the goroutine when
	// a hold is watched instead would put a goroutine switch on every
	// uncontended Lock (measured in bench/: +30% on Lock+Unlock on 2 cores);
	// an idle tick every lease/3 costs nothing, as renew sends nothing for
	// no holds. A hold watched just after a tick is renewed at the next one,
	// within lease/3 of its acquisition, as before.
	timer := time.NewTimer(d.interval)
	defer timer.Stop()
	for {
		all := false
		select {
		case <-d.c.closing:
			return
		case <-timer.C:
		case <-d.kicks:
			all = true
		}
		if d.c.closed.Load() { // the timer fired as Close began
			return
		}
		next := d.tick(all)
		timer.Reset(time.Until(next))
	}
}

// tick renews every watched hold (and with all, checks every leased one too)
// and returns when to run next: a full interval after a clean tick, sooner
// while renewals fail.
func (d *watchdog) tick(all bool) time.Time {
	start := time.Now()
	defer d.ticks.Add(1)
	reg := &d.c.holds
	lease := d.c.opts.watchdogLease
	reg.mu.Lock()
	var holds []*hold
	var gens []string
	var items []renewal
	deadline := start.Add(max(d.interval, time.Second))
	for _, h := range d.candidates(all) {
		if h.gen == "" {
			continue // ended since it was listed
		}
		l := time.Duration(0) // a leased hold is only checked, never extended
		if h.watched {
			l = lease
		}
		holds, gens = append(holds, h), append(gens, h.gen)
		// Built here rather than at Lock: only holds that live a tick need it.
		items = append(items, h.scheme.renewal(h.key.owner, h.gen, l))
		deadline = minTime(deadline, h.expiresAt.time())
	}
	reg.mu.Unlock()
	if len(items) == 0 {
		return start.Add(d.interval)
	}

	// A renewal stuck on a paused server or a partitioned network must not
	// keep a holder believing past its lease (the lock may expire in Redis
	// and be granted to someone else): the lease heap ends each hold
	// then, whatever the call does. The deadline also ends the call then,
	// where go-redis honours context deadlines (ContextTimeoutEnabled);
	// otherwise its read timeout does.
	results, errs := d.renew(items, deadline)
	next, failed, firstErr := d.apply(holds, gens, results, errs, start)
	if d.c.closed.Load() {
		return next // abandoned by Close: nothing to report
	}
	if failed > 0 {
		d.c.log.Warn("relock: renewals failed; retrying", "failed", failed, "of", len(items), "err", firstErr)
	}
	d.lastTick.Store(int64(time.Since(start)))
	d.c.emitRenewed(len(items), failed, time.Since(start), firstErr)
	d.c.recordName() // the Client holds something: its name record lives on
	return next
}

// apply records a tick's results: holds[i] was renewed (or checked) as
// generation gens[i] at start. A result about a generation the hold no
// longer has is stale — the hold ended, or the owner took it again, while
// the batch was out — and is ignored: only the generation it describes can
// be extended or declared lost. So is every result once Close has begun
// (a tick it abandoned): Close decides how its holds end, and a late reply
// must neither extend a hold Close could not release (which would re-arm
// the lease heap's timer and let Token report it held) nor call it lost.
// It returns when to tick next and how many renewals failed.
func (d *watchdog) apply(holds []*hold, gens []string, results []int64, errs []error, start time.Time) (next time.Time, failed int, firstErr error) {
	next = start.Add(d.interval)
	lease := d.c.opts.watchdogLease
	reg := &d.c.holds
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if d.c.closed.Load() { // Close marks the Client closed before it takes reg.mu
		return next, 0, nil
	}
	for i, h := range holds {
		if h.gen != gens[i] {
			continue
		}
		switch {
		case errs[i] == nil && results[i] == 1:
			if h.watched {
				d.c.extendLocked(h, start.Add(safeLease(lease)-h.drift))
			}
		case errs[i] == nil:
			if !h.releasing {
				d.c.endLocked(h, gens[i], lossCause(LossGone, fmt.Errorf("%w: the hold was gone when the watchdog checked it", ErrLockLost)))
			}
		default:
			// Retry soon; the lease heap ends the hold if its lease runs out.
			failed++
			if firstErr == nil {
				firstErr = errs[i]
			}
			next = minTime(next, time.Now().Add(d.retry))
		}
	}
	return next, failed, firstErr
}

// candidates lists the holds a tick looks at: the watched ones, or every
// hold of the Client. Called with the registry lock held.
func (d *watchdog) candidates(all bool) []*hold {
	var out []*hold
	for _, h := range d.c.holds.m {
		if all || h.watched {
			out = append(out, h)
		}
	}
	return out
}

func minTime(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.Before(t) {
			t = u
		}
	}
	return t
}

// renew runs the renewal of items in one pipeline, giving up at deadline,
// and returns each item's result (1 renewed, 0 gone) or error.
func (d *watchdog) renew(items []renewal, deadline time.Time) ([]int64, []error) {
	results := make([]int64, len(items))
	errs := make([]error, len(items))
	ctx, cancel := context.WithDeadline(d.stopped, deadline)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, it := range items {
		if it.run != nil {
			// Runs alongside the pipeline; each writes only its own slot.
			wg.Go(func() { results[i], errs[i] = it.run(ctx) })
		}
	}
	calls, members := d.batches(items)
	if len(calls) == 0 {
		return results, errs
	}
	replies, pipelines := d.c.evalPipeline(ctx, "renew", calls)
	d.roundTrips.Add(int64(pipelines))
	for k, reply := range replies {
		vals, err := reply.Int64Slice()
		if err == nil && len(vals) != len(members[k]) {
			err = errors.New("relock: renewal script returned a malformed reply")
		}
		for j, i := range members[k] {
			if err != nil {
				errs[i] = err
				continue
			}
			results[i] = vals[j]
		}
	}
	return results, errs
}

// batches joins the script items (not those that run by themselves) into
// calls of at most renewBatch items of one script — and on a Cluster of one
// slot, as a script call may only touch keys of one slot — and returns the
// calls and, for each, the indexes of its items.
func (d *watchdog) batches(items []renewal) ([]scriptCall, [][]int) {
	type group struct {
		script *redis.Script
		slot   int
	}
	cluster := d.c.isCluster()
	var calls []scriptCall
	var members [][]int
	open := make(map[group]int) // the call a group is filling
	for i, it := range items {
		if it.run != nil {
			continue
		}
		g := group{script: it.call.script, slot: -1}
		if cluster {
			g.slot = slotOf(it.call.keys[0])
		}
		k, ok := open[g]
		if !ok || len(members[k]) == renewBatch {
			k = len(calls)
			open[g] = k
			calls = append(calls, scriptCall{script: it.call.script})
			members = append(members, nil)
		}
		calls[k].keys = append(calls[k].keys, it.call.keys...)
		calls[k].args = append(calls[k].args, it.call.args...)
		members[k] = append(members[k], i)
	}
	return calls, members
}
