package relock

import (
	"slices"
	"time"
)

// Test-only views of internals that black-box tests assert on.

// WatchdogStats reports the watchdog's ticks, pipeline round trips and the
// duration of its last tick.
func (c *Client) WatchdogStats() (ticks, roundTrips int64, last time.Duration) {
	return c.dog.ticks.Load(), c.dog.roundTrips.Load(), time.Duration(c.dog.lastTick.Load())
}

// WatchedHolds reports how many holds the watchdog renews.
func (c *Client) WatchedHolds() int {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	n := 0
	for _, h := range c.holds.m {
		if h.watched {
			n++
		}
	}
	return n
}

// SubscribedChannels reports how many channels the subscriber holds.
func (c *Client) SubscribedChannels() int { return c.subs.channels() }

// TrackedHolds reports how many hold records the Client keeps.
func (c *Client) TrackedHolds() int {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	return len(c.holds.m)
}

// WatchdogTick runs one renewal tick now.
func (c *Client) WatchdogTick() { c.dog.tick(false) }

// QueuedWaiters reports how many waiters of this Client sleep on channel.
func (c *Client) QueuedWaiters(channel string) int {
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	if st := c.subs.chans[channel]; st != nil {
		return st.queue.Len()
	}
	return 0
}

// CoalesceStats reports how many sends c's coalescer made and how many
// script calls they carried.
func (c *Client) CoalesceStats() (sends, calls uint64) {
	c.coalesce.mu.Lock()
	defer c.coalesce.mu.Unlock()
	return c.coalesce.sends, c.coalesce.calls
}

// RedisCPU returns the CPU time (user + system) the server has used.
var RedisCPU = redisCPU

// CoalesceMaxBatch is the largest batch of coalesced script calls.
const CoalesceMaxBatch = coalesceMaxBatch

// The defaults the godoc of the options states, for tests that check them.
const (
	DefaultWatchdogLease = defaultWatchdogLease
	DefaultUnlockTimeout = defaultUnlockTimeout
)

// LatchMarkTTL is how long a CountDownLatch's mark lives at least.
const LatchMarkTTL = latchMarkTTL

// The test doubles of helpers_internal_test.go, lent to the external tests
// so that each is written once.
type (
	PassHook        = passHook
	CountingHandler = countingHandler
)

// QueueKey returns the Redis key of the FairLock's queue of waiters (the
// inspect package decodes it for operators).
func (l *FairLock) QueueKey() string { return l.keys.queue }

// Locks returns the parts in the order they are acquired.
func (m *MultiLock) Locks() []*Lock { return slices.Clone(m.parts) }

// ReleaseGoroutines counts the releases Unlock ran on a goroutine of its
// own rather than on the caller's (see inline.go).
func ReleaseGoroutines() uint64 { return releaseGoroutines.Load() }
