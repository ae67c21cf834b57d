package relock

import (
	"context"
	"time"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

// spinEvery is how often a SpinLock's waiter tries again while the holder's
// lease lasts longer.
const spinEvery = 20 * time.Millisecond

// SpinLock is a Lock whose waiters poll every 20 ms, without pub/sub, for
// short holds or a user denied pub/sub; it is not the Lock of its name.
type SpinLock struct {
	exclusive // Name, Key and the queries
	keys      lockKeys
}

// SpinLock returns the spin lock called name, as Client.Lock does.
func (c *Client) SpinLock(name string) *SpinLock {
	l := &SpinLock{}
	if l.init(c, name) {
		l.keys = spinKeysOf(l.ks)
		l.hash = &l.keys.hash
	}
	return l
}

// spinKeysOf lays a SpinLock out as a Lock under its own suffix.
func spinKeysOf(ks keyspace) lockKeys {
	return lockKeysOn(ks.key("spin"), ks.key("spin:ch"))
}

// Lock is Lock.Lock.
func (l *SpinLock) Lock(ctx context.Context) (context.Context, error) {
	return l.TryLock(ctx, WaitForever, 0)
}

// TryLock is Lock.TryLock.
func (l *SpinLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return l.tryLock(ctx, soleOf(spinScheme{l}), wait, lease)
}

// Unlock is Lock.Unlock.
func (l *SpinLock) Unlock(ctx context.Context) error { return l.unlock(ctx, soleOf(spinScheme{l})) }

// Do is Lock.Do.
func (l *SpinLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, l.Lock, l.Unlock, fn)
}

// ForceUnlock is Lock.ForceUnlock; the first waiter to poll takes the lock.
func (l *SpinLock) ForceUnlock(ctx context.Context) (bool, error) {
	return l.forceUnlock(ctx, ForceGuard{}, l.keys.hash, lockForceReleaseCall(l.c, l.keys, ForceGuard{}))
}

// Token is Lock.Token.
func (l *SpinLock) Token(ctx context.Context) (int64, error) { return l.token(ctx, spinScheme{l}) }

// spinScheme runs Lock's scripts on a SpinLock's keys, never queueing: a
// busy attempt names no channel, so the wait loop polls.
type spinScheme struct{ l *SpinLock }

func (s spinScheme) client() *Client { return s.l.c }
func (s spinScheme) holdID() string  { return s.l.keys.hash }
func (s spinScheme) info() LockInfo  { return LockInfo{Name: s.l.ks.name, Kind: KindSpinLock} }
func (s spinScheme) traits() traits  { return traits{} }

func (s spinScheme) acquire(ctx context.Context, r acquireReq) (attempt, error) {
	l := s.l
	a, err := l.c.runAcquire(ctx, lockAcquireCall(l.c, l.keys, r.owner, r, false), "", nil)
	if a.outcome == busy && (a.retryIn < 0 || a.retryIn > spinEvery) {
		a.retryIn = spinEvery
	}
	return a, err
}

func (s spinScheme) release(ctx context.Context, r releaseReq) (releaseOutcome, error) {
	l := s.l
	return l.c.runRelease(ctx, lockReleaseCall(l.c, l.keys, r.owner, r))
}

func (s spinScheme) renewal(_, gen string, lease time.Duration) renewal {
	return renewal{call: lockRenewCall(s.l.keys.hash, gen, lease)}
}

// The SpinLock's row in the table of kinds (kinds.go).

func decodeSpin(st *inspect.State, v []keyValue, _ int64) { st.SpinLock = heldExclusive(v[0]) }

func summarizeSpin(st *inspect.State) (inspect.Summary, bool) { return spinView(st).summary() }

func spinRows(st *inspect.State) []kinds.Row { return spinView(st).rows() }

func forceSpin(c *Client, name string, st *inspect.State) []kinds.Release {
	l := c.SpinLock(name)
	return spinView(st).force(l.ForceUnlock, l.ForceUnlockIf)
}

// spinView: a SpinLock has no queue.
func spinView(st *inspect.State) exclusiveView { return exclusiveView{lock: st.SpinLock} }
