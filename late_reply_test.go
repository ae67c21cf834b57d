package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// A grant whose reply comes after its lease has run out is no hold: Redis
// may have given the lock to someone else by then, with a larger token, and
// the late holder would enter with a token below that of the process
// already inside. Here C's command replies are 300 ms late and its lease is
// 200 ms:
//   - TryLock without a wait fails with ErrNotObtained, not a hold that
//     ended in Redis before Lock returned;
//   - a waiter handed the lock keeps trying (its claims come back too late
//     as well) and returns only once a reply comes within the lease, with a
//     hold Redis really gives it and a token above the previous holder's.
func TestGrantWhoseReplyOutlivesItsLeaseIsNotAHold(t *testing.T) {
	eachKind(t, func(t *testing.T, k lockKind) {
		noLeaks(t)
		srv := redistest.Start(t)
		const lease, replyDelay, slowFor = 200 * time.Millisecond, 300 * time.Millisecond, 1200 * time.Millisecond
		faults := redistest.NewConnFaults()
		rdbC := srv.Client()
		rdbC.AddHook(faults)
		c := relock.New(rdbC)
		x := relock.New(srv.Client())
		t.Cleanup(func() { _ = c.Close(); _ = x.Close() })
		name := "late-reply-" + k.name
		key := k.keyOf(x, name)

		faults.SetDelay(redistest.CommandConn, replyDelay)
		hctx, err := k.open(c, name).TryLock(context.Background(), 0, lease)
		if err == nil {
			tok, terr := k.open(c, name).Token(hctx)
			t.Fatalf("TryLock returned a hold whose lease ran out before its reply came (token %d, %v; Redis: %v)",
				tok, terr, k.state(t, srv.Client(), key))
		}
		require.ErrorIs(t, err, relock.ErrNotObtained)

		xctx, err := k.open(x, name).TryLock(context.Background(), 0, 5*time.Second)
		require.NoError(t, err, "the lock is free in Redis: C's lease has run out")
		xToken := token(t, k.open(x, name), xctx)
		got := make(chan granted, 1)
		go func() {
			ctx, err := k.open(c, name).TryLock(context.Background(), 10*time.Second, lease)
			got <- granted{ctx, err}
		}()
		require.Eventually(t, func() bool { return k.waiterSubscribed(srv.Client(), c, name) }, 3*time.Second, 5*time.Millisecond)
		require.NoError(t, k.open(x, name).Unlock(xctx)) // hands the lock to C, whose replies are too slow for it
		select {
		case g := <-got:
			if g.err == nil {
				tok, terr := k.open(c, name).Token(g.ctx)
				t.Fatalf("the waiter took a grant whose reply came after its lease (token %d, %v; Redis: %v)",
					tok, terr, k.state(t, srv.Client(), key))
			}
			t.Fatalf("the waiter gave up: %v", g.err)
		case <-time.After(slowFor):
		}
		faults.SetDelay(redistest.CommandConn, 0)
		healed := time.Now()
		cctx := mustGet(t, got, 3*time.Second)
		t.Logf("held %v after the replies came in time again", time.Since(healed))
		require.NoError(t, cctx.Err(), "the hold is live")
		assert.Greater(t, token(t, k.open(c, name), cctx), xToken)
		assert.Equal(t, map[string]string{ownerField(t, c, cctx): "1"}, k.state(t, srv.Client(), key), "Redis holds it for C")
		err = k.open(c, name).Unlock(cctx)
		assert.True(t, err == nil || errors.Is(err, relock.ErrLockLost), "Unlock: %v", err) // a 200 ms lease may end first
	})
}
