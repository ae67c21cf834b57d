// Package inspect holds the read-only views of what relock keeps in Redis, as
// relock's Client.Inspect, Client.ListLocks and Client.Channels return them.
// They are for operators and tools (the relock command is one); a program
// that only takes and releases locks never needs this package.
//
// The package holds types only. Reading them out of Redis needs the key
// layout, which stays private to relock, so a view is always made by a
// relock Client.
package inspect

import "time"

// Kind is a lock type as inspection reports it. Each type's state has keys
// of its own, so one name can exist as several kinds at once.
type Kind string

// The kinds inspection reports. Their values are those of relock's event
// kinds of the same names; an RWLock is one kind here (its holds are read and
// write sides of one hash), where events name its sides.
const (
	KindLock           Kind = "lock"
	KindFairLock       Kind = "fairlock"
	KindRWLock         Kind = "rwlock"
	KindSemaphore      Kind = "semaphore"
	KindCountDownLatch Kind = "countdownlatch"
	KindSpinLock       Kind = "spinlock"
)

// State is a snapshot of everything relock keeps in Redis for one lock name,
// read atomically. A kind's field is nil when nobody holds that kind and
// nobody waits for it.
type State struct {
	// Name is the lock name.
	Name string
	// ServerTime is the Redis server's clock when the snapshot was taken;
	// every deadline is on that clock.
	ServerTime time.Time
	// Lock is the state of the Lock of this name.
	Lock *Exclusive
	// FairLock is the state of the FairLock of this name.
	FairLock *Fair
	// RWLock is the state of the RWLock of this name.
	RWLock *RW
	// Semaphore is the state of the Semaphore of this name.
	Semaphore *Semaphore
	// CountDownLatch is the state of the CountDownLatch of this name, nil
	// when it is open (an open latch leaves nothing in Redis).
	CountDownLatch *Latch
	// SpinLock is the state of the SpinLock of this name (its waiters poll
	// and leave no trace).
	SpinLock *Exclusive
}

// Kinds returns the kinds that exist under the name (held or waited for), in
// the order Lock, FairLock, RWLock, Semaphore, CountDownLatch (closed),
// SpinLock; none
// when the name is unknown.
func (s *State) Kinds() []Kind {
	var out []Kind
	if s.Lock != nil {
		out = append(out, KindLock)
	}
	if s.FairLock != nil {
		out = append(out, KindFairLock)
	}
	if s.RWLock != nil {
		out = append(out, KindRWLock)
	}
	if s.Semaphore != nil {
		out = append(out, KindSemaphore)
	}
	if s.CountDownLatch != nil {
		out = append(out, KindCountDownLatch)
	}
	if s.SpinLock != nil {
		out = append(out, KindSpinLock)
	}
	return out
}

// Exists reports whether any kind of lock of this name is held or waited for.
func (s *State) Exists() bool { return len(s.Kinds()) > 0 }

// Holder is one owner's hold of a lock.
type Holder struct {
	// Owner is the hash field of the owner: "<client id>:<n>", or the id
	// given to relock.WithOwner.
	Owner string
	// Name is the name of the owner's Client (relock.WithName), "" when
	// unknown: its Client's name record is missing, or the owner is one of
	// WithOwner's. Read best-effort, after the state.
	Name string
	// Count is the owner's hold count (re-entries included); a Semaphore
	// holder's permits.
	Count int
	// Lease is the hold's remaining lease: the hash's PTTL for a Lock or
	// FairLock, the holder's own deadline for an RWLock or Semaphore hold.
	Lease time.Duration
	// WaitsFor is the lock the owner waits for while it holds this one, nil
	// when it waits for nothing that deadlock detection has recorded: only
	// a wait longer than the waiter's Client's detection delay is recorded
	// (see relock.WithDeadlockDetection).
	WaitsFor *Wait
}

// Wait is a lock an owner waits for, as deadlock detection records it.
type Wait struct {
	// Kind is the kind of the wait, as relock's events name it: "lock",
	// "fairlock", "read", "write" or "semaphore".
	Kind string
	// Name is the name of the lock waited for.
	Name string
	// Since is when the wait began, on the clock of the waiter's Client
	// (not the server's).
	Since time.Time
}

// Waiter is an owner waiting for a lock.
type Waiter struct {
	// Owner is the waiting owner, as Holder.Owner.
	Owner string
	// Name is the name of its Client, as Holder.Name.
	Name string
	// Deadline is when the waiter is evicted unless it renews its claim
	// (server clock); zero when Redis has no deadline for it.
	Deadline time.Time
	// Remaining is Deadline minus State.ServerTime (0 without deadline).
	Remaining time.Duration
}

// Exclusive is the state of a held Lock (or the hold of a FairLock).
type Exclusive struct {
	// Key is the Redis key of the lock's hash.
	Key string
	// Holders are the owners holding the lock: one, unless the data was
	// written by something other than relock.
	Holders []Holder
	// Lease is the lock's remaining lease (the hash's PTTL), 0 when free.
	Lease time.Duration
	// Token is the fencing token of the current hold, 0 with fencing off.
	Token int64
	// Queued are a Lock's waiters, in the order its releases hand it over
	// (they have no deadline: a waiter whose Client stopped listening is
	// skipped by the release). FairLock keeps its queue apart
	// (Fair.Waiters).
	Queued []Waiter
}

// Fair is the state of a FairLock: its hold, if any, and its queue.
type Fair struct {
	Exclusive
	// QueueKey is the Redis key of the queue of waiters.
	QueueKey string
	// Waiters are the queued owners, next in line first (a waiter whose
	// Client stopped listening stays listed until a hand-over skips it).
	Waiters []Waiter
}

// RW is the state of an RWLock.
type RW struct {
	// Key is the Redis key of the lock's hash.
	Key string
	// Readers are the owners holding read holds, by owner. Holds whose
	// deadline has passed are left out, as the lock itself ignores them.
	Readers []Holder
	// Writer is the owner of the write hold, or nil.
	Writer *Holder
	// Token is the fencing token of the write hold (0 without one, or with
	// fencing off).
	Token int64
	// WritersWaiting are the writers waiting for the write hold, in the
	// order the release that frees the lock hands it over (the first whose
	// Client still listens gets it). New readers wait behind them. Their
	// claim is the queue's: it lapses at their Deadline, the same for all,
	// unless a writer's next attempt renews it; a lapsed queue is left out.
	WritersWaiting []Waiter
}

// Semaphore is the state of a Semaphore.
type Semaphore struct {
	// Key is the Redis key of the semaphore's hash.
	Key string
	// Permits is the capacity recorded.
	Permits int
	// Used is the permits of the live holds.
	Used int
	// Holders are the live acquisitions: Owner is the acquiring owner,
	// Count its permits, Lease the hold's remaining lease. Holds whose
	// deadline has passed are left out, as the semaphore ignores them.
	Holders []Holder
	// Waiters are the queued acquisitions, served first to last while the
	// free permits suffice. Lapsed claims are left out.
	Waiters []Waiter
	// WaiterPermits are the permits each waiter asks for, in Waiters' order.
	WaiterPermits []int
}

// Latch is the state of a closed CountDownLatch. An open latch has no state:
// the CountDown that opens it deletes its key.
type Latch struct {
	// Key is the Redis key of the latch's hash.
	Key string
	// Count is the count left before the latch opens (at least 1).
	Count int
}

// Summary is one line of relock's Client.ListLocks: one kind of lock under
// one name.
type Summary struct {
	// Name is the lock name.
	Name string
	// Kind is the lock type.
	Kind Kind
	// Holders is the number of owners holding it (readers and writer for an
	// RWLock).
	Holders int
	// Owners are the holders themselves, as State shows them (an RWLock's
	// writer first), each with its Client's Name when known.
	Owners []Holder
	// Waiters is the number of queued waiters: a Lock's or a FairLock's, or
	// an RWLock's writers waiting, or a Semaphore's.
	Waiters int
	// Lease is the longest remaining lease of its holds, 0 when not held.
	Lease time.Duration
	// Token is the fencing token of its exclusive hold, 0 if none.
	Token int64
	// Count is a CountDownLatch's count left; 0 for the other kinds.
	Count int
}

// Channels are the pub/sub channels on which relock announces that a lock of
// one name was released or handed over. A tool that watches a lock
// subscribes to them; relock publishes with SPUBLISH on a Cluster (unless
// relock.WithShardedPubSub(false)) and PUBLISH otherwise. Lease expiry
// publishes nothing, and relock publishes only when someone waits: a release
// nobody waits for is silent.
//
// A watcher must not subscribe to the hand-over channels (the ...Prefix
// fields followed by a Client's id, or a pattern on them): a release counts
// the receivers there to skip a waiter whose Client is gone, and a watcher
// would make such a waiter look alive, so that the release hands it the
// lock, or the permits, for its whole lease.
type Channels struct {
	// Lock is the Lock's channel, told of a release when a MultiLock waits.
	Lock string
	// LockHandOverPrefix, followed by a Client's id, is the channel on
	// which a Lock's release hands the lock over to that Client's waiter:
	// "<waiter id> <token>".
	LockHandOverPrefix string
	// Fair is the FairLock's channel, told of a release when something
	// listens to the hold (relock watch marks it).
	Fair string
	// FairHandOverPrefix, followed by a Client's id, is the channel on which
	// a FairLock's release hands the lock over to that Client's waiter, as
	// LockHandOverPrefix.
	FairHandOverPrefix string
	// RWRead is the RWLock's channel for waiting readers.
	RWRead string
	// RWHandOverPrefix, followed by a Client's id, is the channel on which
	// an RWLock's release hands the write hold over to that Client's
	// waiting writer: "<waiter id> <token>".
	RWHandOverPrefix string
	// SemaphoreHandOverPrefix, followed by a Client's id, is the channel on
	// which a Semaphore's release (or SetPermits) hands permits to that
	// Client's waiter: "<waiter id> 0". A Semaphore has no other channel: a
	// release that hands nothing over publishes nothing.
	SemaphoreHandOverPrefix string
	// Latch is the CountDownLatch's channel, told "all" by the CountDown
	// that opens it (the other CountDowns publish nothing). Nobody counts
	// its receivers: a watcher may subscribe.
	Latch string
}
