package relock

// Copies of an acquire that go-redis sent twice.
//
// go-redis sends a command again when its read times out (MaxRetries, 3 by
// default), on another connection, and relock does not see it. The copy
// sent later can be the one that takes the lock while the first is still
// on its way (in the network, or in a socket buffer Redis has not read
// yet); the first then arrives after the hold has ended and, unfenced,
// takes the lock anew for nobody until its lease runs out. An exclusive
// lock's release records the generation it freed (~f, latch_hset in
// release_common.lua); an RWLock and a Semaphore keep no such record. So a
// grant whose reply took at least the read timeout of the client it went
// on — a read timed out, and the request was sent again — is taken as one
// that may have a copy still on its way: its hold's final release marks
// its generation void (hold.void, scripts/void_common.lua), as for a grant
// relock itself sent again (lockCall.awaitResend). A reply can take that
// long without a copy (a pool wait, a dial): its mark costs the next
// acquires a read of the ring for the unlock latch's time, nothing more.

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// copyRisk is what tells whether go-redis may have sent a request twice.
type copyRisk struct {
	// read is the client's read timeout (0: none known, or go-redis does
	// not send a request again when one runs out).
	read time.Duration
}

// copyRiskOf is rdb's copyRisk: go-redis's clients send a command again
// on a read timeout unless MaxRetries is negative (stored as 0); a client
// relock does not know is not judged.
func copyRiskOf(rdb redis.UniversalClient) copyRisk {
	t, ok := timeoutsOf(rdb)
	if !ok || t.read <= 0 {
		return copyRisk{}
	}
	if r, ok := rdb.(*redis.Client); ok && r.Options().MaxRetries <= 0 {
		return copyRisk{}
	}
	return copyRisk{read: t.read}
}

// readTimeoutFor is the read timeout of the client a request of c's under
// ctx runs on (clones.go), 0 when go-redis does not send it again.
func (c *Client) readTimeoutFor(ctx context.Context) time.Duration {
	if c.copies.read == 0 || !c.clones.any {
		return c.copies.read
	}
	if r, ok := c.rdbFor(ctx).(*redis.Client); ok && r != c.rdb {
		return r.Options().ReadTimeout // a clone's: half its slack
	}
	return c.copies.read
}

// mayBeCopied reports whether the grant of the call's attempt sent at
// started may have a copy of its request still on its way (see above).
// A MultiLock's grant is not judged: its release has no void marks, and
// its parts' releases record the generation they free.
func (k *lockCall) mayBeCopied(started time.Time) bool {
	read := k.ranRead
	if read == 0 {
		read = k.c.copies.read
	}
	return read > 0 && len(k.parts) == 1 && time.Since(started) >= read
}
