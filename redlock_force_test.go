package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// RedLock.ForceUnlockIf frees the masters its owner holds and only those:
// run again after another process took the lock, it frees nothing, changes
// no master and names the holder now with its Client; on masters split
// between the owner and someone else, it frees the owner's and names the
// other. A token guard is refused (the masters' tokens differ), as is an
// empty one, before anything is sent.
func TestRedLockForceUnlockIfFreesOnlyTheOwnersMasters(t *testing.T) {
	srvs := masters(t, 3)
	ctx := context.Background()
	const name = "red/guard"
	key := "relock:{" + name + "}"
	firstClients := process(t, srvs, relock.WithWatchdogLease(900*time.Millisecond))
	first := relock.NewRedLock(name, firstClients, testNodeTimeout)
	operator := relock.NewRedLock(name, process(t, srvs), testNodeTimeout)
	nextClients := process(t, srvs, relock.WithName("proc-n"))
	next := relock.NewRedLock(name, nextClients, testNodeTimeout)

	h1, err := first.Lock(ctx)
	require.NoError(t, err)
	seen := relock.ForceGuard{Owner: redField(t, firstClients[0], h1)}
	n, err := operator.ForceUnlockIf(ctx, seen)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the guard names the hold on every master")
	for _, srv := range srvs {
		assert.Empty(t, hgetall(t, srv.Client(), key))
	}
	select { // another process's RedLock hold ends at its next renewal
	case <-h1.Done():
		assert.ErrorIs(t, context.Cause(h1), relock.ErrLockLost)
	case <-time.After(5 * time.Second):
		t.Fatal("the holder never learned")
	}

	h2, err := next.Lock(ctx)
	require.NoError(t, err)
	nextField := redField(t, nextClients[0], h2)
	before := make([]map[string]string, len(srvs))
	for i, srv := range srvs {
		before[i] = snapshot(t, srv.Client())
	}
	n, err = operator.ForceUnlockIf(ctx, seen)
	assert.Zero(t, n)
	var hc *relock.HolderChangedError
	require.True(t, errors.As(err, &hc), "%v", err)
	assert.Equal(t, []relock.Holder{{Owner: nextField, ClientName: "proc-n"}}, hc.Holders, "it names who holds it now")
	assert.Positive(t, hc.Token)
	assert.Contains(t, err.Error(), nextField+" (proc-n)")
	for _, g := range []relock.ForceGuard{{}, {Token: hc.Token}, {Owner: seen.Owner, Token: hc.Token}} {
		_, err = operator.ForceUnlockIf(ctx, g)
		assert.ErrorIs(t, err, relock.ErrInvalidArgument, "%v", g)
	}
	for i, srv := range srvs {
		assert.Equal(t, before[i], snapshot(t, srv.Client()), "a refused guard changed master %d", i)
	}
	require.NoError(t, h2.Err())

	// The next holder lost master 2, where a plain Lock of the name is
	// held now: its guard frees masters 0 and 1 and names the other.
	require.NoError(t, srvs[2].Client().Del(ctx, key).Err())
	plain := process(t, srvs[2:])[0]
	ph, err := plain.Lock(name).Lock(ctx)
	require.NoError(t, err)
	n, err = operator.ForceUnlockIf(ctx, relock.ForceGuard{Owner: nextField})
	assert.Equal(t, 2, n)
	require.True(t, errors.As(err, &hc), "%v", err)
	assert.Equal(t, ownerField(t, plain, ph), hc.Holders[0].Owner)
	assert.Empty(t, hgetall(t, srvs[0].Client(), key))
	assert.Empty(t, hgetall(t, srvs[1].Client(), key))
	assert.Contains(t, hgetall(t, srvs[2].Client(), key), ownerField(t, plain, ph), "the other owner's master is left")
	require.NoError(t, ph.Err())
	require.NoError(t, plain.Lock(name).Unlock(ph))
}

// A RedLock forced by its own process ends the hold at once with
// ErrForceUnlocked, as every kind's.
func TestRedLockForceUnlockIfEndsItsOwnHoldAtOnce(t *testing.T) {
	srvs := masters(t, 3)
	ctx := context.Background()
	clients := process(t, srvs)
	r := relock.NewRedLock("red/own", clients, testNodeTimeout)
	h, err := r.Lock(ctx)
	require.NoError(t, err)
	n, err := r.ForceUnlockIf(ctx, relock.ForceGuard{Owner: redField(t, clients[0], h)})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	select {
	case <-h.Done():
	default:
		t.Fatal("the hold did not end when ForceUnlockIf returned")
	}
	assert.ErrorIs(t, context.Cause(h), relock.ErrForceUnlocked)
}
