package relock

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
)

// Limits on durations the package accepts. Redis keeps TTLs in milliseconds,
// so anything shorter cannot be expressed; a lease longer than maxDuration is
// almost certainly a unit mistake (nanoseconds passed as a count).
const (
	minDuration = time.Millisecond
	maxDuration = 365 * 24 * time.Hour
)

// defaultWatchdogLease is the lease of a lock taken without a lease time; the
// watchdog renews it every third of that while it is held.
const defaultWatchdogLease = 30 * time.Second

// defaultKeyPrefix starts every key and channel the package uses.
const defaultKeyPrefix = "relock"

type options struct {
	watchdogLease time.Duration
	prefix        string
	logger        *slog.Logger
	fencing       bool
	unlockLatch   time.Duration
	sharded       *bool // nil: decided by the client type
	waiterTimeout time.Duration
	unlockTimeout time.Duration

	replicas       int           // WithReplicas: 0 off
	replicaTimeout time.Duration // WithReplicas

	observer *Observer // WithObserver: nil off

	deadlockAfter time.Duration // WithDeadlockDetection: 0 off
}

func defaultOptions() options {
	return options{
		watchdogLease: defaultWatchdogLease,
		prefix:        defaultKeyPrefix,
		logger:        nil, // slog.Default() when the Client is made (see WithLogger)
		fencing:       true,
		unlockLatch:   30 * time.Second,
		waiterTimeout: defaultWaiterTimeout,
		unlockTimeout: defaultUnlockTimeout,
		deadlockAfter: defaultDeadlockAfter,
	}
}

// An Option configures a Client. Options are applied in order; an invalid one
// makes New return a Client whose every call fails with ErrInvalidArgument.
type Option func(*options) error

// WithWatchdogLease sets the lease of locks taken without a lease time
// (default 30 s). The watchdog renews each such hold every lease/3.
func WithWatchdogLease(d time.Duration) Option {
	return func(o *options) error {
		if err := checkDuration("watchdog lease", d); err != nil {
			return err
		}
		if d < 3*minDuration {
			return fmt.Errorf("%w: watchdog lease %v is shorter than 3ms", ErrInvalidArgument, d)
		}
		o.watchdogLease = d
		return nil
	}
}

// WithKeyPrefix sets the prefix of every key and channel (default "relock").
// It may not contain '{' or '}', which would break the Cluster hash tag.
func WithKeyPrefix(prefix string) Option {
	return func(o *options) error {
		if prefix == "" || strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: key prefix %q must be non-empty and free of '{' and '}'", ErrInvalidArgument, prefix)
		}
		o.prefix = prefix
		return nil
	}
}

// WithLogger sets where the Client reports what it cannot return to a caller:
// failed renewals, lost locks, subscriber reconnects — one Warn line per
// loss and per outage, nothing per acquisition. The default is
// slog.Default(), as read when New runs, so that a loss is never silent;
// WithLogger(slog.New(slog.DiscardHandler)) silences the Client.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidArgument)
		}
		o.logger = l
		return nil
	}
}

// WithFencingTokens turns fencing tokens on (the default) or off. A token
// costs no key of its own: it is stored in the held lock and, for the unlock
// latch after a release, in a tail key (see Lock.Token for how it stays
// monotonic). Off, the acquire scripts skip reading the server clock and the
// tail; Token then reports 0.
func WithFencingTokens(on bool) Option {
	return func(o *options) error {
		o.fencing = on
		return nil
	}
}

// WithUnlockLatch sets how long a final Unlock's marker stays behind (default
// 30 s) so that a network retry of the same Unlock, sent by go-redis after a
// lost reply, is recognised as already done instead of failing with
// ErrLockLost. It must cover go-redis's retries: (MaxRetries+1) × (read
// timeout + retry backoff). The markers live in the lock's tail key, which
// expires this long after the last release and keeps the markers of the
// last 64 final releases: one key per lock whatever the release rate.
func WithUnlockLatch(d time.Duration) Option {
	return func(o *options) error {
		if err := checkDuration("unlock latch", d); err != nil {
			return err
		}
		o.unlockLatch = d
		return nil
	}
}

// WithShardedPubSub forces sharded pub/sub (SSUBSCRIBE/SPUBLISH, Redis 7+) on
// or off. By default it is on for a *redis.ClusterClient and off otherwise.
func WithShardedPubSub(on bool) Option {
	return func(o *options) error {
		o.sharded = &on
		return nil
	}
}

// defaultWaiterTimeout is how long what a waiter keeps in Redis (a
// FairLock's queue, an RWLock writer's claim) lives without being renewed.
const defaultWaiterTimeout = 10 * time.Second

// WithWaiterTimeout sets how long what a waiter keeps in Redis lives without
// being renewed (default 10 s): a FairLock's queue (renewed by the attempts
// of any of its waiters), an RWLock writer's claim that makes new readers
// queue behind it. A live waiter makes an attempt every third of this, one
// round trip each time, so neither lapses unless every waiter stalls that
// long. A waiter whose process died is skipped at once by the next
// hand-over (its Client no longer listens); its RWLock claim keeps new
// readers out for at most this long. A FairLock whose waiters all stalled
// past it loses its queue; they queue again, in the order of their next
// attempts.
func WithWaiterTimeout(d time.Duration) Option {
	return func(o *options) error {
		if err := checkDuration("waiter timeout", d); err != nil {
			return err
		}
		if d < 3*minDuration {
			return fmt.Errorf("%w: waiter timeout %v is shorter than 3ms", ErrInvalidArgument, d)
		}
		o.waiterTimeout = d
		return nil
	}
}

// WithUnlockTimeout sets how long Unlock (and Do's unlock) waits for Redis
// to confirm a release (default 1 s), however long
// Redis hangs. A release not confirmed by then returns an error wrapping
// ErrNotConfirmed and ErrUnavailable: the hold has ended for the caller, is
// no longer renewed, and the release goes on in the background until it is
// confirmed or the lease runs out. It also bounds how long Unlock waits
// behind an earlier request of the same owner on the lock that is still in
// flight; the Unlock then runs in the background, after it.
//
// With a go-redis client made with ContextTimeoutEnabled, go-redis enforces
// the bound itself and Unlock runs its release on the caller's goroutine
// (cheaper: no goroutine hand-off); otherwise the release runs on a
// goroutine of relock's own that the caller stops waiting for at the bound
// (see "Failure and cancellation" in the package doc).
func WithUnlockTimeout(d time.Duration) Option {
	return func(o *options) error {
		if err := checkDuration("unlock timeout", d); err != nil {
			return err
		}
		o.unlockTimeout = d
		return nil
	}
}

// defaultDeadlockAfter is how long a waiter waits before it takes part in
// deadlock detection (see WithDeadlockDetection).
const defaultDeadlockAfter = time.Second

// WithDeadlockDetection sets how long a Lock, FairLock, RWLock (read or
// write) or Semaphore waiter of this Client waits before it takes part in
// deadlock detection (default 1 s; 0 turns detection off for the Client's
// waiters). Such a waiter publishes in Redis which lock its owner waits
// for, under a lease it renews, and every after/2 follows the chain: the
// owners that hold what it waits for, what they wait for, and so on. When
// the chain comes back to its own owner, the cycle is read a second time
// to confirm it, and exactly one waiter of the cycle — the one whose wait
// began last, by its Client's clock (ties: the greater owner) — gives up
// with an error wrapping ErrDeadlock and ErrNotObtained. The others keep
// waiting. A wait shorter than after costs nothing; a longer one costs
// about three Redis commands per after/2 (renew the record, read the holders of its lock, read the holder's record). Only owners whose Clients have
// detection on are seen waiting, and only holds of relock owners are seen
// at all (see "Deadlock detection" in the README for the limits).
func WithDeadlockDetection(after time.Duration) Option {
	return func(o *options) error {
		if after != 0 {
			if err := checkDuration("deadlock detection delay", after); err != nil {
				return err
			}
			if after < 2*minDuration {
				return fmt.Errorf("%w: deadlock detection delay %v is shorter than 2ms", ErrInvalidArgument, after)
			}
		}
		o.deadlockAfter = after
		return nil
	}
}

func checkDuration(what string, d time.Duration) error {
	if d < minDuration || d > maxDuration {
		return fmt.Errorf("%w: %s %v is outside [%v, %v]", ErrInvalidArgument, what, d, minDuration, maxDuration)
	}
	return nil
}

// checkLease accepts 0 (meaning "use the watchdog") or a valid duration.
func checkLease(lease time.Duration) error {
	if lease == 0 {
		return nil
	}
	return checkDuration("lease", lease)
}

// checkWait accepts 0 (one attempt), a duration up to maxDuration, or
// WaitForever.
func checkWait(wait time.Duration) error {
	if wait == WaitForever {
		return nil
	}
	if wait < 0 || wait > maxDuration {
		return fmt.Errorf("%w: wait %v is outside [0, %v]", ErrInvalidArgument, wait, maxDuration)
	}
	return nil
}

// WaitForever, passed as a wait time, waits until the context ends.
const WaitForever time.Duration = math.MaxInt64
