// Package holdctx defines an Analyzer that checks how the hold context
// returned by a relock lock's Lock or TryLock is used.
//
// In github.com/relock-go/relock the context returned by Lock/TryLock is the
// hold: Unlock must be given that context (or one derived from it). A
// Semaphore's Acquire/TryAcquire and Release follow the same contract and
// are checked the same way, except by checks 3 and 4: an Acquire takes
// permits of its own, never re-enters. The analyzer reports seven mistakes:
//
//  1. a discarded hold context: `_, err := l.Lock(ctx)`, or a Lock/TryLock
//     call whose results are all ignored. Nothing can Unlock that hold; the
//     watchdog keeps renewing it for the life of the process. Not reported
//     in _test.go files unless -testfiles is set: tests often try a lock
//     they expect not to get; nor for a Semaphore permit with a constant
//     lease (an expirable permit, a rate limit).
//  2. an Unlock given a context that is not the hold: the function takes
//     the same lock expression with Lock/TryLock, keeps the hold in a local
//     variable, never releases that hold nor hands it on (return, channel
//     send, field, composite literal, &v), and Unlocks with a variable that
//     is neither the hold nor derived from it
//     (`hctx, err := l.Lock(ctx); defer l.Unlock(ctx)`).
//  3. `ctx, err = l.Lock(ctx)` in a loop, with ctx and the lock declared
//     outside it: every iteration after the first re-enters the hold taken
//     by the previous one.
//  4. a hold context shared into a goroutine that locks with it: a Lock,
//     TryLock or Do in a go statement, or in a closure given to errgroup's
//     (or sync.WaitGroup's) Go, given a hold the function took outside
//     that goroutine, or a context derived from it without
//     relock.NewOwner. The owner travels in the context, so the
//     goroutines are one owner and the lock excludes nothing among them.
//  5. b.Unlock(actx): an Unlock of lock b given a hold of another lock a
//     taken in the function (or a context derived from it), when the
//     function also takes b and actx does not derive from b's hold. It
//     does not release b's hold.
//  6. a hold that some path never releases: the function takes a hold into
//     a variable the acquisition declares, and a path from there reaches a
//     return with no Unlock of it (a deferred one counts) and without
//     handing it on (returned, stored, sent, or passed to a function that
//     may release it: one of this package is read, one of another package,
//     an interface method or a function value may). A value that cannot
//     carry the hold (an error, a number) computed from it is not the hold:
//     `if err := validate(hctx); err != nil { return err }` leaks. A
//     ForceUnlock of the lock ends the hold too. The path where the
//     acquisition's error is not nil (if err != nil, errors.Is(err, ...))
//     holds nothing until err is assigned again; a path through any other
//     condition on err, a hold used in a function literal other than a
//     deferred one, and a hold with a constant lease (it ends by itself)
//     are not followed. Not reported in _test.go files unless -testfiles is
//     set: tests often keep a hold on purpose. A call of a function of
//     another package given no relock value (rdb.Decr(hctx, "stock"))
//     only uses the hold: the path goes on past it.
//  7. the parent context where the hold is meant: while a hold is live (or
//     in a Do callback), l.Token(ctx) or l.HoldCount(ctx) with the context
//     the acquisition was given; a nested Lock, TryLock or Do given it on
//     the same lock or a lock of the same Client variable (a new owner
//     while the hold is live); and work given it (a call whose parameter
//     there is a context.Context), which goes on when the lock is lost.
//
// The checks are local to one function (a function declaration together with
// the function literals inside it) and stay quiet when they cannot be sure.
// Calls through an interface, or on a lock expression that is a call
// (c.Lock("x").Unlock(ctx)), are not followed by checks 2 and 3.
package holdctx

const doc = `check the hold contexts of relock locks

The context returned by Lock or TryLock of a github.com/relock-go/relock lock
is the hold; Unlock must be given that context (or one derived from it); a
Semaphore's Acquire/TryAcquire and Release likewise. holdctx reports a discarded hold context (_, err := l.Lock(ctx)), an Unlock
given another context while the hold the function took on that lock is never
released, ctx, err = l.Lock(ctx) inside a loop (silent re-entry on every
iteration), a hold context shared into goroutines (go statements,
errgroup's Go) that lock with it instead of relock.NewOwner(hctx), an Unlock
given the hold of another lock (b.Unlock(actx)), a hold that some path
returns without releasing, and the parent context used where the hold is
meant (l.Token(ctx), a nested Lock(ctx), work given ctx while the hold is
live).`
