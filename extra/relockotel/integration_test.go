package relockotel_test

// These tests run a real Client, on miniredis and on a real redis-server
// (started per test, see internal/redistest: skipped without the binary
// unless RELOCK_REQUIRE_REDIS=1, which CI sets and which makes a missing
// binary a failure), observed through relockotel: what the core reports
// lands in the instruments.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/extra/relockotel"
	"github.com/relock-go/relock/internal/redistest"
)

// backend is a Redis for a Client: rdb, and how to make a TTL of d pass.
type backend struct {
	rdb    *redis.Client
	elapse func(d time.Duration)
}

// eachBackend runs f on miniredis and on a real redis-server.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("miniredis", func(t *testing.T) {
		srv := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		f(t, backend{rdb: rdb, elapse: srv.FastForward}) // miniredis lets keys expire only when told
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := srv.Client()
		f(t, backend{rdb: rdb, elapse: time.Sleep})
	})
}

// A Client observed through relockotel: acquisitions, re-entries, a
// contended wait with its span, losses with their causes, and the holds and
// waiters gauges back to zero.
func TestClientEvents(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t)
		c := relock.New(b.rdb, relock.WithObserver(h.obs), relock.WithName("orders-1"))
		t.Cleanup(func() { _ = c.Close() })
		bg := context.Background()
		orders := c.Lock("orders")

		// Uncontended, with a re-entry.
		ctx, err := orders.Lock(bg)
		must(t, err)
		inner, err := orders.Lock(ctx)
		must(t, err)
		must(t, orders.Unlock(inner))
		must(t, orders.Unlock(ctx))

		// Contended: a second owner waits for the first.
		first, err := orders.Lock(bg)
		must(t, err)
		got := make(chan context.Context)
		go func() {
			ctx, err := orders.Lock(bg)
			if err != nil {
				t.Error(err)
			}
			got <- ctx
		}()
		waitFor(t, func() bool { v, _ := sum(t, h.metrics(t), "relock.lock.waiters", set(kindLock)); return v == 1 })
		time.Sleep(100 * time.Millisecond)
		must(t, orders.Unlock(first))
		second := <-got
		must(t, orders.Unlock(second))

		// Lost: a lease runs out, a ForceUnlock.
		leased, err := orders.TryLock(bg, 0, 100*time.Millisecond)
		must(t, err)
		<-leased.Done()
		b.elapse(time.Second)
		waitFor(t, func() bool { return b.rdb.Exists(bg, orders.Key()).Val() == 0 })
		forced, err := orders.Lock(bg)
		must(t, err)
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
		wantSum(t, ms, "relock.lock.waiters", set(kindLock), 0)
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
		attrs := attribute.NewSet(spans[0].Attributes...)
		if v, _ := attrs.Value(relockotel.ClientKey); v.AsString() != "orders-1" {
			t.Errorf("the wait span's lock.client is %q, want the Client's name", v.AsString())
		}
		if v, _ := attrs.Value(relockotel.OwnerKey); !strings.HasPrefix(v.AsString(), c.ID()+":") {
			t.Errorf("the wait span's lock.owner is %q, want one of the Client's owners", v.AsString())
		}
	})
}

// Waiters that give up leave the gauge too, and their waits are recorded as
// not obtained.
func TestWaitersThatGiveUp(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := newHarness(t)
		c := relock.New(b.rdb, relock.WithObserver(h.obs))
		t.Cleanup(func() { _ = c.Close() })
		bg := context.Background()
		queue := c.FairLock("queue")
		held, err := queue.Lock(bg)
		must(t, err)
		done := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := queue.TryLock(bg, 300*time.Millisecond, 0)
				done <- err
			}()
		}
		waitFor(t, func() bool { v, _ := sum(t, h.metrics(t), "relock.lock.waiters", set(kindFair)); return v == 3 })
		for range 3 {
			if err := <-done; !errors.Is(err, relock.ErrNotObtained) {
				t.Fatalf("TryLock: %v, want ErrNotObtained", err)
			}
		}
		must(t, queue.Unlock(held))
		ms := h.metrics(t)
		wantSum(t, ms, "relock.lock.waiters", set(kindFair), 0)
		wantHistCount(t, ms, "relock.lock.wait", set(kindFair, contended(yes), notObtained(yes)), 3)
		wantSum(t, ms, "relock.locks.held", set(kindFair), 0)
	})
}

// A Redis restart without persistence forgets the hold; the Client finds
// out (its presence connection breaks) and the loss is counted as gone.
func TestRestartIsALoss(t *testing.T) {
	srv := redistest.Start(t)
	h := newHarness(t)
	c := relock.New(srv.Client(), relock.WithObserver(h.obs))
	t.Cleanup(func() { _ = c.Close() })
	held, err := c.Lock("orders").Lock(context.Background())
	must(t, err)
	srv.Restart()
	select {
	case <-held.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the hold was not reported lost after the restart")
	}
	ms := h.metrics(t)
	wantSum(t, ms, "relock.lock.losses", set(kindLock, cause(relockotel.CauseGone)), 1)
	wantSum(t, ms, "relock.locks.held", set(kindLock), 0)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
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
