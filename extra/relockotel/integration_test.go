//go:build relock_integration

// This test needs the core's Observer call sites (on main since the lead's
// hook commits). Run it with
//
//	go test -tags relock_integration ./...
//
// The tag goes once the core emits every event this test checks.

package relockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/extra/relockotel"
)

// A real Client on miniredis, observed through relockotel: what the core
// reports lands in the instruments, and the losses get their causes.
func TestClientEvents(t *testing.T) {
	h := newHarness(t)
	srv := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb, relock.WithObserver(h.obs))
	bg := context.Background()
	orders := c.Lock("orders")

	// Uncontended, with a re-entry.
	ctx, err := orders.Lock(bg)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := orders.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	must(t, orders.Unlock(inner))
	must(t, orders.Unlock(ctx))

	// Contended: a second owner waits for the first.
	first, err := orders.Lock(bg)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan context.Context)
	go func() {
		ctx, err := orders.Lock(bg)
		if err != nil {
			t.Error(err)
		}
		got <- ctx
	}()
	time.Sleep(100 * time.Millisecond)
	must(t, orders.Unlock(first))
	second := <-got
	must(t, orders.Unlock(second))

	// Lost: a lease runs out, a ForceUnlock.
	leased, err := orders.TryLock(bg, 0, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-leased.Done()
	srv.FastForward(time.Second) // miniredis lets keys expire only when told
	forced, err := orders.Lock(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := orders.ForceUnlock(bg); err != nil {
		t.Fatal(err)
	}
	<-forced.Done()
	ms := h.metrics(t)
	const acq = "relock.lock.acquisitions"
	wantSum(t, ms, acq, set(kindLock, contended(no), reentry(no)), 4)
	wantSum(t, ms, acq, set(kindLock, contended(no), reentry(yes)), 1)
	wantSum(t, ms, acq, set(kindLock, contended(yes), reentry(no)), 1)
	wantSum(t, ms, "relock.locks.held", set(kindLock), 0)
	for _, c := range []string{relockotel.CauseExpired, relockotel.CauseForceUnlocked} {
		wantSum(t, ms, "relock.lock.losses", set(kindLock, cause(c)), 1)
	}
	if n := points(t, ms, "relock.lock.losses"); n != 2 {
		t.Errorf("losses: %d data points, want 2 (one per cause)", n)
	}
	if n := points(t, ms, "relock.lock.wait"); n != 2 {
		t.Errorf("wait: %d data points, want 2 (contended and not)", n)
	}
	wantHistCount(t, ms, "relock.lock.held", set(kindLock, lost(no)), 3)
	wantHistCount(t, ms, "relock.lock.held", set(kindLock, lost(yes)), 2)

	spans := h.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d wait spans, want 1", len(spans))
	}
	if d := spans[0].EndTime.Sub(spans[0].StartTime); d < 50*time.Millisecond {
		t.Errorf("the wait span lasts %v; the waiter waited about 100ms", d)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantHistCount(t *testing.T, ms map[string]metricdata.Metrics, name string, attrs attribute.Set, count uint64) {
	t.Helper()
	h, _ := ms[name].Data.(metricdata.Histogram[float64])
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&attrs) {
			if dp.Count != count {
				t.Errorf("%s{%s}: count %d, want %d", name, attrs.Encoded(attribute.DefaultEncoder()), dp.Count, count)
			}
			return
		}
	}
	t.Errorf("%s{%s}: no data point", name, attrs.Encoded(attribute.DefaultEncoder()))
}
