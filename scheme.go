package relock

// The engine's seam: what each lock type implements, and the requests and
// outcomes that cross it. The engine that drives it is in engine.go,
// unlock.go and cleanup.go.
//
// Two levels. A scheme is one lock type's scripts for one hold record:
// Lock, FairLock, each side of an RWLock, a Semaphore acquisition, RedLock.
// A target is what one Lock or Unlock call works on: a list of hold records
// (its parts) and how one attempt reaches them all. Every scheme is a
// target of one part (sole); a MultiLock is a target of several parts, each
// an ordinary Lock record, reached a group per script call. The engine
// always works on the list of parts, so a MultiLock needs no record of its
// own, no renewal and no queue: it is not a scheme. What a scheme does
// differently beyond its scripts is in plain values (traits), not in
// optional interfaces.

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// A scheme is what one lock type contributes to the shared engine for one
// hold record: its scripts, run for one owner, and its traits. Everything
// else — owners, hold contexts, waiting, the watchdog, replays, clean-up
// after faults — is common to every lock type and lives in the engine
// (engine.go, unlock.go, cleanup.go).
type scheme interface {
	client() *Client
	// holdID names the lock (and mode) in the Client's registry of holds.
	holdID() string
	info() LockInfo
	// acquire runs the acquire script once.
	acquire(ctx context.Context, r acquireReq) (attempt, error)
	// release runs the release script once.
	release(ctx context.Context, r releaseReq) (releaseOutcome, error)
	// renewal is the watchdog's work item for one generation of owner's
	// hold: renew it to lease, or only check it (lease 0).
	renewal(owner, gen string, lease time.Duration) renewal
	// traits are the scheme's fixed facts the engine adjusts to.
	traits() traits
}

// traits are what a scheme does differently from the common case, as plain
// values; the zero value is the common case (waiters woken by a broadcast,
// no clock drift, attempts bounded by the caller alone).
type traits struct {
	// queue, when set, queues the scheme's waiters in Redis and has its
	// releases hand the lock over to the first of them (see waitQueue).
	queue waitQueue
	// A hold counts as gone sooner than its lease, by driftRate × lease +
	// driftFloor: the allowance for the clock drift between the servers
	// that granted it (RedLock).
	driftRate  float64
	driftFloor time.Duration
	// attemptBound, when set, is how long an attempt may take at most (it
	// ends by itself: RedLock's node timeouts); TryLock's wait lets its last
	// attempt finish.
	attemptBound time.Duration
	// otherClients: the scheme's requests run on other Clients' connections
	// too, fanned out on goroutines of its own (RedLock's masters), so
	// Unlock never runs its release inline (see unlockCall.inline).
	otherClients bool
}

// drift is how much sooner than lease a hold of the scheme counts as gone.
func (t traits) drift(lease time.Duration) time.Duration {
	if t.driftRate == 0 && t.driftFloor == 0 {
		return 0
	}
	return time.Duration(float64(lease)*t.driftRate) + t.driftFloor
}

// A waitQueue is the queue of a scheme whose waiters queue in Redis and are
// handed the lock by the release that frees it (see queue_common.lua): a
// waiter sends the same op id at every attempt, which is its id in the queue
// and the generation of the hold a hand-over grants it, and the grant
// reaches it on its Client's channel for the lock (channel, which its busy
// attempts name). A waiter queues only while its Client listens there: a
// release skips a waiter whose Client does not (see hand_over), so one
// queued before its subscription is confirmed could lose its place to a
// later one. The first wait on a lock therefore queues at the attempt that
// follows the subscription's confirmation; later ones, on a lingering
// subscription, at their first.
type waitQueue interface {
	channel() string
	// leave takes waiter, which gave up, out of the queue, and releases a
	// grant that crossed its leaving (see Client.leaveQueue). owner "" is
	// the release of a stray grant (see strayRelease). lease is the one its
	// attempts asked for (a FairLock's entry names it, see fair_common.lua).
	leave(ctx context.Context, owner, waiter string, lease time.Duration)
}

// A target is what one Lock or Unlock call works on: its hold records, one
// per part, and how one attempt reaches them all. The engine enters,
// serialises, grants and ends every part's record the same way, one part or
// many.
type target interface {
	client() *Client // where the call waits and is reported
	info() LockInfo  // what the wait's events name
	traits() traits
	// partCount is how many parts the call works on; record(i) is part
	// i's scheme, in the order their semaphores are taken.
	partCount() int
	record(i int) scheme
	// acquireParts is one attempt on every part. req is as for a scheme
	// (owner and gen are per part, in parts); lease is as asked (0: each
	// part's watchdog lease). A grant says each part's generation and
	// token (attempt.grantOf).
	acquireParts(ctx context.Context, req acquireReq, parts []lockPart) (attempt, error)
	// leftover settles an attempt sent as op that may have left a grant
	// nobody will use: a grant a that came too late, or err, of unknown
	// outcome. It takes back at once what the next attempt would not take
	// over and returns the generation, if any, that giveUp must free.
	leftover(ctx context.Context, req acquireReq, parts []lockPart, op string, a attempt, err error) string
	// takeBack releases at once a grant a that nobody will use, handing
	// what it cannot release to the background clean-up.
	takeBack(ctx context.Context, req acquireReq, parts []lockPart, a attempt)
	// releaseParts ends one entry of each live part: it sets each one's
	// op and outcome (or error).
	releaseParts(ctx context.Context, parts []unlockPart)
	// unlockError is the error Unlock returns for the parts' failures
	// (at least one).
	unlockError(parts []unlockPart, fails []partFailure) error
}

// partFailure is why part (an index into the call's parts) failed.
type partFailure struct {
	part int
	err  error
}

// A lockPart is one hold record a Lock call works on — the lock's own, or
// one part's of a MultiLock — and the generation held when the call began
// ("" for none).
type lockPart struct {
	h    *hold
	held string
}

// An unlockPart is one hold record an Unlock call works on: the entry it
// ends; live when that has not ended yet, and then its request (whose op the
// target's releaseParts sets), lease end, start and the release's outcome or
// error; cut when an inline release was cut short (see inline.go).
type unlockPart struct {
	e            *entry
	live, cut    bool
	req          releaseReq
	until, since time.Time
	out          releaseOutcome
	err          error
}

func (p lockPart) hold() *hold   { return p.h }
func (p unlockPart) hold() *hold { return p.e.h }

// part is a lockPart or an unlockPart: what serialise and leave work on.
type part interface {
	lockPart | unlockPart | closePart
	hold() *hold
}

// serialise takes the semaphores of the parts' records in order, so that
// two calls of one owner over overlapping parts cannot deadlock, and
// returns how many it took. It gives up when ctx ends. Either way the caller
// calls leave.
func serialise[P part](ctx context.Context, parts []P) (int, error) {
	for i, p := range parts {
		select {
		case p.hold().sem <- struct{}{}:
		case <-ctx.Done():
			return i, notObtained(ctx)
		}
	}
	return len(parts), nil
}

// leave gives back the first taken semaphores and ends the call's use of
// every part's record.
func leave[P part](parts []P, taken int) {
	for i := taken - 1; i >= 0; i-- {
		<-parts[i].hold().sem
	}
	for _, p := range parts {
		h := p.hold()
		h.client().holds.exit(h)
	}
}

// acquireReq is one run of an acquire script. op names this very request
// (a replay of it is recognised by it); gen is the generation the owner
// holds, "" for a new acquisition, whose generation will be op.
type acquireReq struct {
	owner, op, gen string
	lease          time.Duration
	// waiter: op is the id of a waiter (a queued acquisition that may
	// wait, see waitQueue), so a busy attempt queues it. A TryLock that
	// does not wait never queues, and so leaves nothing to take back.
	waiter bool
	// refs: where owner, op and gen are kept, for sending them unboxed
	// (see strArg); set where that is known, on the paths every Lock takes.
	refs argRefs
}

// newOp gives r a new op id of c's, with its reference (see strArg).
func (r *acquireReq) newOp(c *Client) {
	r.refs.op = c.newOpRef()
	r.op = *r.refs.op
}

// releaseReq is one run of a release script; final says the Client has no
// other entry of this hold, so the lock is freed whatever the count says.
type releaseReq struct {
	owner, op, gen string
	final          bool
	// ahead: the position of a Lock's queue that a final release expects
	// at its head (0: none; see hold.at).
	ahead int64
	// void: the release of an acquire whose outcome is unknown, or the
	// final release of a hold whose acquire was sent twice (hold.void);
	// gen is that acquire's op id: the release marks it void, so that the
	// request, should it reach Redis only now, takes nothing
	// (scripts/void_common.lua).
	void bool
	// until is when the hold's lease ends at the latest (zero: unknown): a
	// scheme that retries part of a release in the background stops then.
	until time.Time
	refs  argRefs // as acquireReq's
}

type outcome int

const (
	busy     outcome = iota // held by another owner
	acquired                // granted (or re-entered)
	mismatch                // the generation the Client holds is gone from Redis: lost
)

// attempt is the result of one run of an acquire script: what every scheme
// returns.
type attempt struct {
	outcome outcome
	gen     string        // acquired: the hold's generation (set by the engine)
	token   int64         // acquired: fencing token of the hold
	retryIn time.Duration // busy: the remaining lease of the holder (< 0: unknown)
	channel string        // busy: where the holder's release is announced ("" to poll at retryIn)
	place   queuePlace    // busy: where the attempt left the waiter in the lock's queue (see wait.go)
	// at: busy, the waiter's position in a Lock's queue (0: none known);
	// acquired, the position the waiter held when the lock was handed to
	// it (see hold.at).
	at int64
	// busy: which Client's subscriber carries channel (nil: the waiting
	// Client's) — a part of a MultiLock may belong to another Client.
	subs *subscriber
	// busy: why, when it is not simply another holder (joined to
	// ErrNotObtained): a RedLock round that failed, a grant refused.
	cause error
	// acquired with WithReplicas: why the grant did not reach the replicas
	// (nil: it did). The engine then undoes the grant.
	replication error
	// acquired, for a target of several parts: each part's generation and
	// token, in order (else gen and token are the one part's).
	grants []partGrant
	// acquired: the reply is that of the request sent again after the
	// first was cut short (lockCall.awaitResend); the first may still reach
	// Redis, so the hold's final release marks its generation void.
	resent bool
}

type partGrant struct {
	gen   string
	token int64
	at    int64 // see attempt.at
	void  bool  // see attempt.resent
}

// grantOf is what a granted attempt gave part i.
func (a attempt) grantOf(i int) partGrant {
	if a.grants != nil {
		return a.grants[i]
	}
	return partGrant{gen: a.gen, token: a.token, at: a.at, void: a.resent}
}

type releaseOutcome int

const (
	released  releaseOutcome = iota // the lock is free
	stillHeld                       // one hold released, the owner keeps the rest
	notHeld                         // the generation was gone: lost
)

// renewal is one hold's share of a watchdog batch. Items with the same script
// go out in one call: KEYS are the items' keys one after the other, ARGV the
// items' args in the same order. The script returns one integer per item:
// 1 renewed, 0 gone.
type renewal struct {
	call scriptCall
	// run, when set, renews the hold by itself instead of joining a batch:
	// for a hold spread over several deployments (RedLock), which no single
	// script call can reach. It returns 1 renewed, 0 gone, like a script.
	run func(ctx context.Context) (int64, error)
}

// parseAcquire reads the reply shared by the acquire scripts: {1, token,
// count}, {0, pttl, place[, at]} or {-1, 0}.
func parseAcquire(res []int64, channel string) (attempt, error) {
	if len(res) < 2 {
		return attempt{}, fmt.Errorf("relock: acquire script returned %d values, want 2 to 4", len(res))
	}
	switch res[0] {
	case 1:
		return attempt{outcome: acquired, token: res[1]}, nil
	case 0:
		a := attempt{outcome: busy, retryIn: leaseLeft(res[1]), channel: channel}
		if len(res) > 2 {
			a.place = queuePlace(res[2])
		}
		if len(res) > 3 {
			a.at = res[3]
		}
		return a, nil
	case -1:
		return attempt{outcome: mismatch}, nil
	}
	return attempt{}, fmt.Errorf("relock: acquire script returned status %d", res[0])
}

// parseRelease reads the reply shared by the release scripts.
func parseRelease(n int64) (releaseOutcome, error) {
	switch n {
	case 1:
		return released, nil
	case 0:
		return stillHeld, nil
	case -1:
		return notHeld, nil
	}
	return 0, fmt.Errorf("relock: release script returned %s", strconv.FormatInt(n, 10))
}
