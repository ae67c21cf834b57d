package relock

import "strconv"

// LatchInspect is the state of a closed CountDownLatch as Inspect reads it.
// An open latch has no state: the CountDown that opens it deletes its key.
type LatchInspect struct {
	// Key is the Redis key of the latch's hash.
	Key string
	// Count is the count left before the latch opens (at least 1).
	Count int
}

// latchInspect reads a latch's count (its field n, "" when the key does not
// exist); nil when the latch is open.
func latchInspect(key, count string) *LatchInspect {
	n, err := strconv.Atoi(count)
	if err != nil || n <= 0 {
		return nil
	}
	return &LatchInspect{Key: key, Count: n}
}

// LockChannels are the pub/sub channels on which relock announces that a
// lock of one name was released or handed over. A tool that watches a lock
// subscribes to them; relock publishes with SPUBLISH on a Cluster (unless
// WithShardedPubSub(false)) and PUBLISH otherwise. Lease expiry publishes
// nothing, and relock publishes only when someone waits: a release nobody
// waits for is silent.
//
// A watcher must not subscribe to the hand-over channels (the ...Prefix
// fields followed by a Client's id, or a pattern on them): a release counts
// the receivers there to skip a waiter whose Client is gone, and a watcher
// would make such a waiter look alive, so that the release hands it the
// lock, or the permits, for its whole lease.
type LockChannels struct {
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

// Channels returns the pub/sub channels of the locks called name.
func (c *Client) Channels(name string) (LockChannels, error) {
	if err := c.usable(); err != nil {
		return LockChannels{}, err
	}
	ks, err := newKeyspace(c.opts.prefix, name)
	if err != nil {
		return LockChannels{}, err
	}
	rw := rwKeysOf(ks)
	lk := lockKeysOf(ks)
	fk := fairKeysOf(ks)
	return LockChannels{Lock: lk.channel, LockHandOverPrefix: lk.hash + ":w:", Fair: fk.channel,
		FairHandOverPrefix: fk.hash + ":w:", RWRead: rw.readCh, RWHandOverPrefix: rw.hash + ":w:",
		SemaphoreHandOverPrefix: ks.key("sema") + ":w:", Latch: ks.key("latch:ch")}, nil
}
