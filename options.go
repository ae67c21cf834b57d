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

	name string // WithName; defaultName() when the Client is made
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

// An Option configures a Client; an invalid one fails every call.
type Option func(*options) error

// WithWatchdogLease sets the lease of holds without a lease time (30 s).
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

// WithKeyPrefix sets the prefix of every key and channel ("relock").
func WithKeyPrefix(prefix string) Option {
	return func(o *options) error {
		if prefix == "" || strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: key prefix %q must be non-empty and free of '{' and '}'", ErrInvalidArgument, prefix)
		}
		o.prefix = prefix
		return nil
	}
}

// WithLogger sets the Client's logger (default slog.Default() at New).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidArgument)
		}
		o.logger = l
		return nil
	}
}

// WithFencingTokens turns fencing tokens on (the default) or off.
func WithFencingTokens(on bool) Option {
	return func(o *options) error {
		o.fencing = on
		return nil
	}
}

// WithUnlockLatch sets how long a final Unlock is remembered (30 s), so that
// go-redis's resend reports success; a Lock remembers 32 to 40 (docs/kinds.md).
func WithUnlockLatch(d time.Duration) Option {
	return func(o *options) error {
		if err := checkDuration("unlock latch", d); err != nil {
			return err
		}
		o.unlockLatch = d
		return nil
	}
}

// WithShardedPubSub turns sharded pub/sub on or off (default: where it works).
func WithShardedPubSub(on bool) Option {
	return func(o *options) error {
		o.sharded = &on
		return nil
	}
}

// defaultWaiterTimeout is how long what a waiter keeps in Redis (a
// FairLock's queue, an RWLock writer's claim) lives without being renewed.
const defaultWaiterTimeout = 10 * time.Second

// WithWaiterTimeout sets how long a FairLock queue or writer claim lives unrenewed (10 s).
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

// WithUnlockTimeout bounds Unlock, Release, Close (1 s; see docs/errors.md).
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

// WithDeadlockDetection sets how long a waiter waits (1 s; 0: off) before
// it looks for a deadlock; the last wait of a cycle fails with ErrDeadlock.
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
