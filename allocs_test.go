package relock_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// lockUnlockAllocBudget is how many allocations an uncontended Lock+Unlock
// may make on a real Redis (client side, go-redis included): 28 measured.
// Of those, about 11 are go-redis's (its connection check, the Cmd, the
// reply) and 4 the bounded release's deadline context (inline.go: the
// release runs on the caller's goroutine, on a clone of go-redis's default
// client; the goroutine path it replaced, with pooled waits, made 2). What keeps it
// there: each script call's EVALSHA command line is built once, the lock's
// keys boxed once or sent by pointer (scripts.go newCall, keySet); the
// owner, op and generation go to the scripts unboxed, and owner contexts,
// hold contexts and op ids are one allocation each (ids.go: strArg,
// ownerCtx, newOpRef; registry.go: entry); a hold's lease end is a place in
// the Client's lease heap, not a timer of its own (leases.go); an acquire's
// reply is read on the stack (call.go appendInt64s). The budget leaves room
// for the odd allocation of background goroutines (the subscriber, the
// watchdog) during the run.
const lockUnlockAllocBudget = 28

// TestLockUnlockAllocBudget keeps the per-cycle cost from creeping back:
// every allocation is paid by every Lock+Unlock of every user.
func TestLockUnlockAllocBudget(t *testing.T) {
	bk := newReal(t)
	c := bk.newClient(t)
	got := lockUnlockAllocs(t, c)
	budget := float64(lockUnlockAllocBudget)
	if raceEnabled {
		budget += 4 // see race_on_test.go
	}
	t.Logf("Lock+Unlock: %.1f allocs (budget %.0f)", got, budget)
	if got > budget {
		t.Fatalf("Lock+Unlock made %.1f allocations, more than the budget of %.0f", got, budget)
	}
}

// TestEachLockFindsItsEntryInANestedContext: a hold context made from
// another carries both holds' entries, found by the Client alone and then
// by lock (entryKey's outer links). Each lock's Unlock with the inner
// context ends its own hold, whichever order, and a third lock finds none.
func TestEachLockFindsItsEntryInANestedContext(t *testing.T) {
	bk := newReal(t)
	c := bk.newClient(t)
	a, b, other := c.Lock("nest-a"), c.Lock("nest-b"), c.Lock("nest-other")
	ctxA, err := a.Lock(context.Background())
	require.NoError(t, err)
	ctxB, err := b.Lock(ctxA)
	require.NoError(t, err)
	require.ErrorIs(t, other.Unlock(ctxB), relock.ErrNotHeld)

	require.NoError(t, a.Unlock(ctxB)) // the outer lock, with the inner context
	held, err := a.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, held, "a's hold ended")
	held, err = b.IsLocked(context.Background())
	require.NoError(t, err)
	assert.True(t, held, "b's hold goes on")

	require.NoError(t, b.Unlock(ctxB))
	held, err = b.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, held)
}

// lockUnlockAllocs is the allocations of one uncontended Lock+Unlock on c,
// its pools warmed and its scripts loaded first.
func lockUnlockAllocs(t *testing.T, c *relock.Client) float64 {
	l := c.Lock("allocs")
	ctx := context.Background()
	cycle := func() {
		held, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(held); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 { // warm the pools, load the scripts
		cycle()
	}
	return testing.AllocsPerRun(500, cycle)
}
