package relock

// The engine's seam: what each lock type implements (scheme, and for
// MultiLock partedScheme), and the requests and outcomes that cross it. The
// engine that drives it is in engine.go, unlock.go and cleanup.go.

import (
	"context"
	"time"
)

// A scheme is what one lock type contributes to the shared engine: its
// scripts, run for one owner. Everything else — owners, hold contexts,
// waiting, the watchdog, replays, clean-up after faults — is common to every
// lock type and lives in the engine (engine.go, unlock.go, cleanup.go).
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
	// abandon is called when a wait for the lock ends without it, so that
	// types that register waiters in Redis (FairLock) can take them out.
	// waiter is the waiter's id in a handingScheme's queue ("" when it
	// did not queue).
	abandon(ctx context.Context, owner, waiter string)
}

// A partedScheme keeps its hold in the records of other schemes, its parts
// (MultiLock: one Lock per part, each in its own Client's registry), instead
// of a record of its own. The engine enters, serialises, grants and ends
// every part's record as it does the one record of another scheme; the
// partedScheme's acquire and release run all the parts at once. They find
// the parts in the request (acquireReq.parts, releaseReq.parts) and leave
// each part's result there.
type partedScheme interface {
	scheme
	parts() []scheme
	// takeBack releases every part of a grant that nobody will use (see
	// lockCall.takeBack), handing what it cannot release to the background
	// clean-up; lease is as asked.
	takeBack(ctx context.Context, parts []part, lease time.Duration) error
}

func isParted(s scheme) bool {
	_, ok := s.(partedScheme)
	return ok
}

// records returns the schemes whose hold records a call on s works on, in
// the order their semaphores are taken: s itself, or a partedScheme's parts.
func records(s scheme) []scheme {
	if p, ok := s.(partedScheme); ok {
		return p.parts()
	}
	return []scheme{s}
}

// A part is one hold record a Lock or Unlock call works on — the lock's own,
// or one part's of a partedScheme — and its share of the call.
type part struct {
	h *hold
	// Lock: the generation held when the call began ("" for none), then
	// the generation and token of the grant (set by a partedScheme's acquire
	// when it grants).
	held, gen string
	token     int64
	// Unlock: the entry it ends; live when that has not ended yet, and then
	// its request (whose op a partedScheme's release sets), lease end, start
	// and the release's outcome or error.
	e            *entry
	live         bool
	req          releaseReq
	until, since time.Time
	out          releaseOutcome
	err          error
}

// serialise takes the semaphores of the parts' records in order, so that
// two calls of one owner over overlapping parts cannot deadlock, and
// returns how many it took. It gives up when ctx ends. Either way the caller
// calls leave.
func serialise(ctx context.Context, parts []part) (int, error) {
	for i, p := range parts {
		select {
		case p.h.sem <- struct{}{}:
		case <-ctx.Done():
			return i, notObtained(ctx)
		}
	}
	return len(parts), nil
}

// leave gives back the first taken semaphores and ends the call's use of
// every part's record.
func leave(parts []part, taken int) {
	for i := taken - 1; i >= 0; i-- {
		<-parts[i].h.sem
	}
	for _, p := range parts {
		p.h.client().holds.exit(p.h)
	}
}

// acquireReq is one run of an acquire script. op names this very request
// (a replay of it is recognised by it); gen is the generation the owner
// holds, "" for a new acquisition, whose generation will be op.
//
// For a partedScheme, owner and gen are per part, in parts, and lease is as
// asked (0: each part's watchdog lease).
type acquireReq struct {
	owner, op, gen string
	lease          time.Duration
	parts          []part
	// waiter: op is the id of a waiter (a handingScheme's acquisition that
	// may wait), so a busy attempt queues it. A TryLock that does not wait
	// never queues, and so leaves nothing to take back.
	waiter bool
}

// releaseReq is one run of a release script; final says the Client has no
// other entry of this hold, so the lock is freed whatever the count says.
// For a partedScheme, the requests are per part, in parts.
type releaseReq struct {
	owner, op, gen string
	final          bool
	parts          []part
	// until is when the hold's lease ends at the latest (zero: unknown): a
	// scheme that retries part of a release in the background stops then.
	until time.Time
}

// A handingScheme queues its waiters in Redis and has its releases hand
// the lock over to the first of them (see queue_common.lua): a waiter sends
// the same op id at every attempt, which is its id in the queue and the
// generation of the hold a hand-over grants it, and the grant reaches it on
// its Client's channel for the lock (waitChannel, which its busy attempts
// name). A waiter queues only while its Client listens there: a release
// skips a waiter whose Client does not (see hand_over), so one queued before
// its subscription is confirmed could lose its place to a later one. The
// first wait on a lock therefore queues at the attempt that follows the
// subscription's confirmation; later ones, on a lingering subscription, at
// their first.
type handingScheme interface {
	waitChannel() string
}

func handsOver(s scheme) bool {
	_, ok := s.(handingScheme)
	return ok
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
	attemptExtras
}

// attemptExtras are the results of one feature each, which only some
// schemes return. They stay on the attempt because the shared loop reads
// them: subs by subscriber.follow (a MultiLock waits on another Client's
// subscriber), cause by attempt.notObtained (why a RedLock round failed),
// replication by lockWith (a grant WithReplicas could not confirm is undone).
// The next step, if they grow: cause as the error of a busy attempt,
// replication kept by the scheme, subs named by the channel.
type attemptExtras struct {
	subs  *subscriber // busy: which Client carries channel (nil: the scheme's) — MultiLock
	cause error       // busy: why, when it is not simply another holder (joined to ErrNotObtained) — RedLock
	// acquired with WithReplicas: why the grant did not reach the replicas
	// (nil: it did). lockWith then undoes the grant.
	replication error
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
