package relockotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/extra/relockotel"
)

// harness is an Observer wired to an in-memory metric reader and span
// exporter of the OTel SDK.
type harness struct {
	obs    *relock.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.InMemoryExporter
}

func newHarness(t *testing.T, opts ...relockotel.Option) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewInMemoryExporter()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(h.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := relockotel.NewObserver(append([]relockotel.Option{
		relockotel.WithMeterProvider(mp), relockotel.WithTracerProvider(tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	return h
}

// metrics collects every metric by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != relockotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func set(kv ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kv...) }

// sum returns the value of the counter's data point with exactly attrs, and
// whether there is one.
func sum(t *testing.T, ms map[string]metricdata.Metrics, name string, attrs attribute.Set) (int64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, false
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, not an int64 sum", name, m.Data)
	}
	for _, dp := range s.DataPoints {
		if dp.Attributes.Equals(&attrs) {
			return dp.Value, true
		}
	}
	return 0, false
}

func wantSum(t *testing.T, ms map[string]metricdata.Metrics, name string, attrs attribute.Set, want int64) {
	t.Helper()
	got, ok := sum(t, ms, name, attrs)
	if !ok {
		t.Errorf("%s{%s}: no data point", name, attrs.Encoded(attribute.DefaultEncoder()))
		return
	}
	if got != want {
		t.Errorf("%s{%s} = %d, want %d", name, attrs.Encoded(attribute.DefaultEncoder()), got, want)
	}
}

func points(t *testing.T, ms map[string]metricdata.Metrics, name string) int {
	t.Helper()
	switch d := ms[name].Data.(type) {
	case metricdata.Sum[int64]:
		return len(d.DataPoints)
	case metricdata.Histogram[float64]:
		return len(d.DataPoints)
	case nil:
		return 0
	default:
		t.Fatalf("%s: unexpected %T", name, d)
		return 0
	}
}

// wantHist checks the count and sum (seconds) of a histogram's data point.
func wantHist(t *testing.T, ms map[string]metricdata.Metrics, name string, attrs attribute.Set, count uint64, total float64) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Errorf("%s: not recorded", name)
		return
	}
	if m.Unit != "s" {
		t.Errorf("%s: unit %q, want s", name, m.Unit)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, not a float64 histogram", name, m.Data)
	}
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&attrs) {
			if dp.Count != count || fmt.Sprintf("%.6f", dp.Sum) != fmt.Sprintf("%.6f", total) {
				t.Errorf("%s{%s}: count %d sum %v, want %d and %v", name,
					attrs.Encoded(attribute.DefaultEncoder()), dp.Count, dp.Sum, count, total)
			}
			return
		}
	}
	t.Errorf("%s{%s}: no data point", name, attrs.Encoded(attribute.DefaultEncoder()))
}

var (
	kindLock  = relockotel.KindKey.String("lock")
	kindFair  = relockotel.KindKey.String("fairlock")
	kindWrite = relockotel.KindKey.String("write")
	yes       = true
	no        = false
)

func contended(b bool) attribute.KeyValue   { return relockotel.ContendedKey.Bool(b) }
func reentry(b bool) attribute.KeyValue     { return relockotel.ReentryKey.Bool(b) }
func notObtained(b bool) attribute.KeyValue { return relockotel.NotObtainedKey.Bool(b) }
func lost(b bool) attribute.KeyValue        { return relockotel.LostKey.Bool(b) }
func cause(c string) attribute.KeyValue     { return relockotel.CauseKey.String(c) }

func info(name string, k relock.Kind) relock.LockInfo { return relock.LockInfo{Name: name, Kind: k} }

var bg = context.Background()

// Every Observer func, driven with events, lands in its instrument.
func TestObserverRecordsEveryInstrument(t *testing.T) {
	h := newHarness(t)
	o := h.obs
	orders := info("orders", relock.KindLock)

	// Two uncontended acquisitions, one re-entry, one after a wait.
	o.Acquired(bg, relock.AcquiredEvent{LockInfo: orders, Wait: 2 * time.Millisecond, Attempts: 1, Token: 7})
	o.Acquired(bg, relock.AcquiredEvent{LockInfo: orders, Wait: 0, Reentry: true})
	o.Released(bg, relock.ReleasedEvent{LockInfo: orders, Held: time.Millisecond})                    // the re-entry
	o.Released(bg, relock.ReleasedEvent{LockInfo: orders, Held: 500 * time.Millisecond, Final: true}) // the hold
	o.Acquired(bg, relock.AcquiredEvent{LockInfo: orders, Wait: 3 * time.Millisecond, Attempts: 1})
	o.WaitStarted(bg, orders)
	o.WaitEnded(bg, relock.WaitEvent{LockInfo: orders, Waited: 1500 * time.Millisecond, Attempts: 3})
	o.Acquired(bg, relock.AcquiredEvent{LockInfo: orders, Wait: 1500 * time.Millisecond, Attempts: 3, Contended: true})
	// A Lock that gave up.
	gaveUp := fmt.Errorf("%w: %w", relock.ErrNotObtained, context.DeadlineExceeded)
	o.WaitStarted(bg, info("orders", relock.KindFairLock))
	o.WaitEnded(bg, relock.WaitEvent{LockInfo: info("orders", relock.KindFairLock), Waited: 250 * time.Millisecond,
		Attempts: 2, NotObtained: true, Err: gaveUp})
	// An Unlock that Redis did not confirm ends the hold all the same; one
	// that found it lost leaves it to the Lost event.
	o.Released(bg, relock.ReleasedEvent{LockInfo: orders, Held: time.Second, Final: true, Err: errors.New("i/o timeout")})
	o.Released(bg, relock.ReleasedEvent{LockInfo: orders, Held: time.Second, Final: true, Err: relock.ErrLockLost})
	// Losses, one per reason; the cause's text plays no part.
	o.Lost(relock.LostEvent{LockInfo: orders, Held: 2 * time.Second, Reason: relock.LossExpired,
		Cause: fmt.Errorf("%w: lease expired", relock.ErrLockLost)})
	o.Acquired(bg, relock.AcquiredEvent{LockInfo: info("w", relock.KindWriteLock), Wait: time.Millisecond, Attempts: 1})
	o.Lost(relock.LostEvent{LockInfo: info("w", relock.KindWriteLock), Held: time.Second, Reason: relock.LossForceUnlocked,
		Cause: relock.ErrLockLost})
	o.Lost(relock.LostEvent{LockInfo: orders, Reason: relock.LossGone, Cause: fmt.Errorf("%w: force-unlocked (misleading text)", relock.ErrLockLost)})
	o.Lost(relock.LostEvent{LockInfo: orders, Reason: relock.LossRenewalFailed, Cause: relock.ErrLockLost})
	o.Lost(relock.LostEvent{LockInfo: orders, Reason: relock.LossClientClosed, Cause: relock.ErrClientClosed})
	o.Lost(relock.LostEvent{LockInfo: orders, Reason: relock.LossReason("from a later core"), Cause: errors.New("something else")})
	// The watchdog and the subscriber.
	o.Renewed(relock.RenewedEvent{Holds: 5, Failed: 2, Duration: time.Millisecond, Err: errors.New("timeout")})
	o.Renewed(relock.RenewedEvent{Holds: 3})
	o.SubscriberReconnected(relock.SubscriberEvent{Shard: "10.0.0.1:6379", Down: time.Second})
	o.SubscriberReconnected(relock.SubscriberEvent{})

	ms := h.metrics(t)
	const acq = "relock.lock.acquisitions"
	wantSum(t, ms, acq, set(kindLock, contended(no), reentry(no)), 2)
	wantSum(t, ms, acq, set(kindLock, contended(no), reentry(yes)), 1)
	wantSum(t, ms, acq, set(kindLock, contended(yes), reentry(no)), 1)
	wantSum(t, ms, acq, set(kindWrite, contended(no), reentry(no)), 1)
	if n := points(t, ms, acq); n != 4 {
		t.Errorf("%s: %d data points, want 4", acq, n)
	}

	const wait = "relock.lock.wait"
	wantHist(t, ms, wait, set(kindLock, contended(no), notObtained(no)), 2, 0.005)
	wantHist(t, ms, wait, set(kindLock, contended(yes), notObtained(no)), 1, 1.5)
	wantHist(t, ms, wait, set(kindFair, contended(yes), notObtained(yes)), 1, 0.25)
	wantHist(t, ms, wait, set(kindWrite, contended(no), notObtained(no)), 1, 0.001)

	const held = "relock.lock.held"
	wantHist(t, ms, held, set(kindLock, lost(no)), 2, 1.5)
	wantHist(t, ms, held, set(kindLock, lost(yes)), 5, 2)
	wantHist(t, ms, held, set(kindWrite, lost(yes)), 1, 1)

	const losses = "relock.lock.losses"
	wantSum(t, ms, losses, set(kindLock, cause(relockotel.CauseExpired)), 1)
	wantSum(t, ms, losses, set(kindWrite, cause(relockotel.CauseForceUnlocked)), 1)
	wantSum(t, ms, losses, set(kindLock, cause(relockotel.CauseGone)), 1)
	wantSum(t, ms, losses, set(kindLock, cause(relockotel.CauseRenewalFailed)), 1)
	wantSum(t, ms, losses, set(kindLock, cause(relockotel.CauseClientClosed)), 1)
	wantSum(t, ms, losses, set(kindLock, cause(relockotel.CauseOther)), 1)

	// Holds: orders +1 -1 +1 +1 -1 (unconfirmed Unlock) -5 losses;
	// the write lock +1 -1. An up-down counter may go below zero when events
	// are made up like this; the sums are what matter.
	wantSum(t, ms, "relock.locks.held", set(kindLock), 1-5)
	wantSum(t, ms, "relock.locks.held", set(kindWrite), 0)

	// Every wait ended: no waiter left.
	wantSum(t, ms, "relock.lock.waiters", set(kindLock), 0)
	wantSum(t, ms, "relock.lock.waiters", set(kindFair), 0)

	wantSum(t, ms, "relock.renewals", set(relockotel.OutcomeKey.String("ok")), 6)
	wantSum(t, ms, "relock.renewals", set(relockotel.OutcomeKey.String("failed")), 2)
	wantSum(t, ms, "relock.subscriber.reconnects", set(), 2)

	// No lock name anywhere by default.
	for name, m := range ms {
		for _, attrs := range attrSets(m) {
			if _, ok := attrs.Value(relockotel.NameKey); ok {
				t.Errorf("%s has a lock.name attribute without WithLockNameAttribute", name)
			}
		}
	}

	// One span per wait, covering it.
	spans := h.spans.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, want := range []struct {
		kind        string
		attempts    int64
		notObtained bool
		waited      time.Duration
		status      codes.Code
	}{
		{"lock", 3, false, 1500 * time.Millisecond, codes.Unset},
		{"fairlock", 2, true, 250 * time.Millisecond, codes.Error},
	} {
		s := spans[i]
		if s.Name != "relock.wait" {
			t.Errorf("span %d: name %q", i, s.Name)
		}
		if d := s.EndTime.Sub(s.StartTime); d != want.waited {
			t.Errorf("span %d lasts %v, want %v", i, d, want.waited)
		}
		if s.Status.Code != want.status {
			t.Errorf("span %d: status %v, want %v", i, s.Status.Code, want.status)
		}
		attrs := attribute.NewSet(s.Attributes...)
		wantSet := attribute.NewSet(relockotel.KindKey.String(want.kind),
			relockotel.AttemptsKey.Int64(want.attempts), notObtained(want.notObtained))
		if !attrs.Equals(&wantSet) {
			t.Errorf("span %d: attributes %s, want %s", i, attrs.Encoded(attribute.DefaultEncoder()),
				wantSet.Encoded(attribute.DefaultEncoder()))
		}
	}
	if got := spans[1].Status.Description; got != gaveUp.Error() {
		t.Errorf("span status %q, want %q", got, gaveUp.Error())
	}
}

func attrSets(m metricdata.Metrics) []attribute.Set {
	var out []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	}
	return out
}

// With WithLockNameAttribute(true), lock.name joins every lock's attributes,
// on metrics and spans; kinds the package does not know are recorded too.
func TestLockNameAttribute(t *testing.T) {
	h := newHarness(t, relockotel.WithLockNameAttribute(true))
	o := h.obs
	for _, name := range []string{"a", "b", "a"} {
		o.Acquired(bg, relock.AcquiredEvent{LockInfo: info(name, relock.KindLock), Wait: time.Millisecond})
		o.Released(bg, relock.ReleasedEvent{LockInfo: info(name, relock.KindLock), Held: time.Millisecond, Final: true})
	}
	o.Lost(relock.LostEvent{LockInfo: info("a", relock.KindLock), Reason: relock.LossClientClosed, Cause: relock.ErrClientClosed})
	o.WaitStarted(bg, info("a", relock.KindLock))
	o.WaitEnded(bg, relock.WaitEvent{LockInfo: info("a", relock.KindLock), Waited: time.Second, Attempts: 2})

	ms := h.metrics(t)
	nameA, nameB := relockotel.NameKey.String("a"), relockotel.NameKey.String("b")
	wantSum(t, ms, "relock.lock.acquisitions", set(kindLock, nameA, contended(no), reentry(no)), 2)
	wantSum(t, ms, "relock.lock.acquisitions", set(kindLock, nameB, contended(no), reentry(no)), 1)
	wantSum(t, ms, "relock.locks.held", set(kindLock, nameA), -1)
	wantSum(t, ms, "relock.locks.held", set(kindLock, nameB), 0)
	wantSum(t, ms, "relock.lock.losses", set(kindLock, nameA, cause(relockotel.CauseClientClosed)), 1)
	wantHist(t, ms, "relock.lock.held", set(kindLock, nameB, lost(no)), 1, 0.001)
	wantSum(t, ms, "relock.lock.waiters", set(kindLock, nameA), 0)
	spans := h.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	spanAttrs := attribute.NewSet(spans[0].Attributes...)
	if v, ok := spanAttrs.Value(relockotel.NameKey); !ok || v.AsString() != "a" {
		t.Errorf("span lock.name = %v, %v", v.AsString(), ok)
	}

	// A kind added to the core later still gets its own attribute value.
	h2 := newHarness(t)
	h2.obs.Acquired(bg, relock.AcquiredEvent{LockInfo: info("x", relock.Kind("semaphore")), Wait: time.Millisecond})
	wantSum(t, h2.metrics(t), "relock.lock.acquisitions",
		set(relockotel.KindKey.String("semaphore"), contended(no), reentry(no)), 1)
}

// The global providers are the default; with the OTel API's no-op globals
// NewObserver still works and the hooks do nothing.
func TestDefaultProviders(t *testing.T) {
	obs, err := relockotel.NewObserver()
	if err != nil {
		t.Fatal(err)
	}
	obs.Acquired(bg, relock.AcquiredEvent{LockInfo: info("a", relock.KindLock)})
	obs.WaitEnded(bg, relock.WaitEvent{LockInfo: info("a", relock.KindLock), Waited: time.Second})
	if obs.Acquired == nil || obs.Released == nil || obs.Renewed == nil || obs.Lost == nil ||
		obs.WaitStarted == nil || obs.WaitEnded == nil || obs.SubscriberReconnected == nil || obs.Deadlock == nil {
		t.Error("a hook is nil")
	}
}

// The hot path, an uncontended Lock and its Unlock, allocates nothing of its
// own: attribute sets are built once.
func TestAcquireReleaseAllocations(t *testing.T) {
	h := newHarness(t)
	o := h.obs
	acq := relock.AcquiredEvent{LockInfo: info("orders", relock.KindLock), Wait: time.Millisecond, Attempts: 1}
	rel := relock.ReleasedEvent{LockInfo: info("orders", relock.KindLock), Held: time.Millisecond, Final: true}
	o.Acquired(bg, acq)
	o.Released(bg, rel)
	if n := testing.AllocsPerRun(1000, func() { o.Acquired(bg, acq); o.Released(bg, rel) }); n > 0 {
		t.Errorf("Acquired+Released allocate %v times, want 0", n)
	}
}

func BenchmarkAcquiredReleased(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	o, err := relockotel.NewObserver(relockotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	acq := relock.AcquiredEvent{LockInfo: info("orders", relock.KindLock), Wait: time.Millisecond, Attempts: 1}
	rel := relock.ReleasedEvent{LockInfo: info("orders", relock.KindLock), Held: time.Millisecond, Final: true}
	b.ReportAllocs()
	for b.Loop() {
		o.Acquired(bg, acq)
		o.Released(bg, rel)
	}
}

// The waiters gauge follows WaitStarted and WaitEnded, per kind: it counts
// the waits under way when the reader collects.
func TestWaitersGauge(t *testing.T) {
	h := newHarness(t)
	o := h.obs
	orders, fair := info("orders", relock.KindLock), info("queue", relock.KindFairLock)
	o.WaitStarted(bg, orders)
	o.WaitStarted(bg, orders)
	o.WaitStarted(bg, fair)
	ms := h.metrics(t)
	wantSum(t, ms, "relock.lock.waiters", set(kindLock), 2)
	wantSum(t, ms, "relock.lock.waiters", set(kindFair), 1)
	if m := ms["relock.lock.waiters"]; m.Unit != "{waiter}" {
		t.Errorf("unit %q", m.Unit)
	} else if s, ok := m.Data.(metricdata.Sum[int64]); !ok || s.IsMonotonic {
		t.Errorf("relock.lock.waiters is %T (monotonic %v), want a non-monotonic sum", m.Data, ok && s.IsMonotonic)
	}

	o.WaitEnded(bg, relock.WaitEvent{LockInfo: orders, Waited: time.Millisecond, Attempts: 2})
	o.WaitEnded(bg, relock.WaitEvent{LockInfo: fair, Waited: time.Millisecond, Attempts: 2, NotObtained: true,
		Err: relock.ErrNotObtained})
	ms = h.metrics(t)
	wantSum(t, ms, "relock.lock.waiters", set(kindLock), 1)
	wantSum(t, ms, "relock.lock.waiters", set(kindFair), 0)
}

// The wait span is a child of the span in the Lock caller's context.
func TestWaitSpanHasTheCallersParent(t *testing.T) {
	h := newHarness(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	defer tp.Shutdown(bg)
	ctx, parent := tp.Tracer("app").Start(bg, "handle request")
	h.obs.WaitStarted(ctx, info("orders", relock.KindLock))
	h.obs.WaitEnded(ctx, relock.WaitEvent{LockInfo: info("orders", relock.KindLock), Waited: time.Millisecond, Attempts: 2})
	parent.End()
	spans := h.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	if got, want := spans[0].Parent.SpanID(), parent.SpanContext().SpanID(); got != want {
		t.Errorf("wait span's parent %v, want the caller's span %v", got, want)
	}
	if spans[0].SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Error("the wait span is not in the caller's trace")
	}
}

// A reason the package does not know, and one a hook gets from a newer core,
// maps to other: the cause attribute is a fixed set whatever the core sends.
func TestLossCauseIsBounded(t *testing.T) {
	h := newHarness(t, relockotel.WithLockNameAttribute(false))
	for i := range 50 {
		h.obs.Lost(relock.LostEvent{LockInfo: info("orders", relock.KindLock), Reason: relock.LossReason(fmt.Sprint("r", i)),
			Cause: fmt.Errorf("%w: attempt %d", relock.ErrLockLost, i)})
	}
	ms := h.metrics(t)
	wantSum(t, ms, "relock.lock.losses", set(kindLock, cause(relockotel.CauseOther)), 50)
	if n := points(t, ms, "relock.lock.losses"); n != 1 {
		t.Errorf("%d series of losses, want 1", n)
	}
}

// A deadlock the Client broke is counted by the kind its victim waited for.
func TestDeadlockCounter(t *testing.T) {
	h := newHarness(t)
	cycle := []relock.DeadlockWait{{Holder: relock.Holder{Owner: "a:1"}, Lock: info("x", relock.KindLock)},
		{Holder: relock.Holder{Owner: "b:1"}, Lock: info("y", relock.KindFairLock)}}
	h.obs.Deadlock(bg, relock.DeadlockEvent{LockInfo: info("x", relock.KindLock), Cycle: cycle})
	h.obs.Deadlock(bg, relock.DeadlockEvent{LockInfo: info("x", relock.KindLock), Cycle: cycle})
	h.obs.Deadlock(bg, relock.DeadlockEvent{LockInfo: info("s", relock.KindSemaphore), Cycle: cycle})
	ms := h.metrics(t)
	wantSum(t, ms, "relock.deadlocks", set(relockotel.KindKey.String("lock")), 2)
	wantSum(t, ms, "relock.deadlocks", set(relockotel.KindKey.String("semaphore")), 1)
}

// The wait span names the waiting owner and its Client (lock.owner,
// lock.client); no metric carries either.
func TestWaitSpanNamesTheHolder(t *testing.T) {
	h := newHarness(t)
	who := relock.Holder{Owner: "k2aV:4", ClientName: "orders-worker-1"}
	h.obs.Acquired(bg, relock.AcquiredEvent{LockInfo: info("orders", relock.KindLock), Holder: who, Wait: time.Millisecond})
	h.obs.WaitStarted(bg, info("orders", relock.KindLock))
	h.obs.WaitEnded(bg, relock.WaitEvent{LockInfo: info("orders", relock.KindLock), Holder: who, Waited: time.Millisecond, Attempts: 2})
	h.obs.Released(bg, relock.ReleasedEvent{LockInfo: info("orders", relock.KindLock), Holder: who, Final: true})
	spans := h.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	attrs := attribute.NewSet(spans[0].Attributes...)
	for key, want := range map[attribute.Key]string{relockotel.OwnerKey: who.Owner, relockotel.ClientKey: who.ClientName} {
		if v, ok := attrs.Value(key); !ok || v.AsString() != want {
			t.Errorf("span %s = %q (%v), want %q", key, v.AsString(), ok, want)
		}
	}
	for name, m := range h.metrics(t) {
		for _, set := range attrSets(m) {
			if set.HasValue(relockotel.OwnerKey) || set.HasValue(relockotel.ClientKey) {
				t.Errorf("%s carries an owner or a Client name", name)
			}
		}
	}
}

// A broken deadlock adds an event to the victim caller's span that names
// each owner of the cycle and its Client.
func TestDeadlockSpanEventNamesTheCycle(t *testing.T) {
	h := newHarness(t)
	app := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(app))
	defer tp.Shutdown(bg)
	ctx, parent := tp.Tracer("app").Start(bg, "handle request")
	cycle := []relock.DeadlockWait{{Holder: relock.Holder{Owner: "a:1", ClientName: "proc-a"}, Lock: info("x", relock.KindLock)},
		{Holder: relock.Holder{Owner: "b:1"}, Lock: info("y", relock.KindLock)}}
	h.obs.Deadlock(ctx, relock.DeadlockEvent{LockInfo: info("x", relock.KindLock), Cycle: cycle})
	parent.End()
	spans := app.GetSpans()
	if len(spans) != 1 || len(spans[0].Events) != 1 {
		t.Fatalf("%d spans, want 1 with 1 event", len(spans))
	}
	ev := spans[0].Events[0]
	attrs := attribute.NewSet(ev.Attributes...)
	owners, _ := attrs.Value(relockotel.CycleOwnersKey)
	clients, _ := attrs.Value(relockotel.CycleClientsKey)
	if ev.Name != "relock.deadlock" || fmt.Sprint(owners.AsStringSlice()) != "[a:1 b:1]" || fmt.Sprint(clients.AsStringSlice()) != "[proc-a ]" {
		t.Errorf("event %q: owners %v, clients %q", ev.Name, owners.AsStringSlice(), clients.AsStringSlice())
	}
}
