package relockotel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/relock-go/relock"
)

// A hold still open when its Client closes is released by Close: a final
// release, no loss, and it leaves the holds gauge; the deferred Unlock after
// Close has nothing left to do and takes nothing out a second time.
func TestClientCloseReleasesItsHolds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t)
		c := relock.New(b.rdb, relock.WithObserver(h.obs))
		orders := c.Lock("orders")

		held, err := orders.Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		inner, err := orders.Lock(held) // a re-entry: still one hold
		if err != nil {
			t.Fatal(err)
		}
		must(t, c.Close())
		<-held.Done()
		if !errors.Is(context.Cause(held), relock.ErrClientClosed) {
			t.Fatalf("cause %v", context.Cause(held))
		}
		if locked, err := orders.IsLocked(context.Background()); err != nil || locked {
			t.Error("Close did not free the lock")
		}
		must(t, orders.Unlock(inner))
		must(t, orders.Unlock(held))

		ms := h.metrics(t)
		wantSum(t, ms, "relock.lock.acquisitions", set(kindLock, contended(no), reentry(no)), 1)
		wantSum(t, ms, "relock.lock.acquisitions", set(kindLock, contended(no), reentry(yes)), 1)
		wantSum(t, ms, "relock.locks.held", set(kindLock), 0)
		wantHistCount(t, ms, "relock.lock.held", set(kindLock, lost(no)), 1)
		if n := points(t, ms, "relock.lock.held"); n != 1 {
			t.Errorf("relock.lock.held: %d data points, want only the release", n)
		}
	})
}
