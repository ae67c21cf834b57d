package relockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/extra/relockotel"
)

// A Semaphore's acquisitions are holds like a lock's, under kind
// "semaphore"; a CountDownLatch's waits are waits under "countdownlatch".
func TestSemaphoreAndLatchEvents(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t)
		c := relock.New(b.rdb, relock.WithObserver(h.obs))
		t.Cleanup(func() { _ = c.Close() })
		bg := context.Background()
		sema := relockotel.KindKey.String(string(relock.KindSemaphore))
		latch := relockotel.KindKey.String(string(relock.KindCountDownLatch))

		s := c.Semaphore("pool", 2)
		h1, err := s.Acquire(bg, 2)
		must(t, err)
		got := make(chan context.Context)
		go func() {
			ctx, err := s.Acquire(bg, 1)
			if err != nil {
				t.Error(err)
			}
			got <- ctx
		}()
		waitFor(t, func() bool { v, _ := sum(t, h.metrics(t), "relock.lock.waiters", set(sema)); return v == 1 })
		must(t, s.Release(h1))
		must(t, s.Release(<-got))

		l := c.CountDownLatch("start")
		if _, err := l.TrySetCount(bg, 1); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- l.Wait(bg) }()
		waitFor(t, func() bool { v, _ := sum(t, h.metrics(t), "relock.lock.waiters", set(latch)); return v == 1 })
		time.Sleep(10 * time.Millisecond)
		must(t, l.CountDown(bg))
		must(t, <-done)

		ms := h.metrics(t)
		const acq = "relock.lock.acquisitions"
		wantSum(t, ms, acq, set(sema, contended(no), reentry(no)), 1)
		wantSum(t, ms, acq, set(sema, contended(yes), reentry(no)), 1)
		wantSum(t, ms, "relock.locks.held", set(sema), 0)
		wantSum(t, ms, "relock.lock.waiters", set(sema), 0)
		wantSum(t, ms, "relock.lock.waiters", set(latch), 0)
		wantHistCount(t, ms, "relock.lock.held", set(sema, lost(no)), 2)
	})
}
