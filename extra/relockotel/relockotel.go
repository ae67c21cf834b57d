// Package relockotel turns relock's Observer hooks into OpenTelemetry
// metrics and spans.
//
//	obs, err := relockotel.NewObserver() // the global MeterProvider and TracerProvider
//	if err != nil { ... }
//	locks := relock.New(rdb, relock.WithObserver(obs))
//
// Metrics (durations in seconds):
//
//	relock.lock.wait            histogram       lock.kind, contended, not_obtained
//	relock.lock.held            histogram       lock.kind, lost
//	relock.lock.acquisitions    counter         lock.kind, contended, reentry
//	relock.lock.losses          counter         lock.kind, cause
//	relock.locks.held           up-down counter lock.kind
//	relock.lock.waiters         up-down counter lock.kind
//	relock.renewals             counter         outcome (ok, failed)
//	relock.subscriber.reconnects counter
//	relock.deadlocks            counter         lock.kind
//
// cause is one of a fixed set (the Cause* constants), taken from the core's
// typed LostEvent.Reason, never from error text, so that it cannot add
// series.
//
// A Lock that had to wait also gets a span "relock.wait" covering the wait,
// with the attributes lock.kind, attempts, not_obtained, and lock.owner and
// lock.client, the waiting owner and its Client's name (relock.WithName),
// which metrics leave out: an owner is one series per hold, and the
// process's resource attributes tell its series apart. It is a child of
// the span in the context the Lock was called with, and measurements of the
// hooks that get that context record with it (so exemplars can link to the
// caller's trace); losses, renewals and reconnects happen on the Client's own
// goroutines and record without one.
//
// Lock names are left out of every attribute unless WithLockNameAttribute
// turns them on: a name per user or per order would make a time series per
// name. The hooks run on the lock operation's goroutine; they never block and,
// without lock names, record with attribute sets computed once in NewObserver.
package relockotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/relock-go/relock"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/relock-go/relock/extra/relockotel"

// Attribute keys.
const (
	KindKey        = attribute.Key("lock.kind")
	NameKey        = attribute.Key("lock.name")
	ContendedKey   = attribute.Key("contended")
	ReentryKey     = attribute.Key("reentry")
	NotObtainedKey = attribute.Key("not_obtained")
	LostKey        = attribute.Key("lost")
	CauseKey       = attribute.Key("cause")
	OutcomeKey     = attribute.Key("outcome")
	AttemptsKey    = attribute.Key("attempts")
	OwnerKey       = attribute.Key("lock.owner")  // spans only: relock.Holder.Owner
	ClientKey      = attribute.Key("lock.client") // spans only: relock.Holder.ClientName
	// The owners of a deadlock's waits and their Clients' names ("" when
	// unknown), victim first: the relock.deadlock span event's.
	CycleOwnersKey  = attribute.Key("lock.cycle.owners")
	CycleClientsKey = attribute.Key("lock.cycle.clients")
)

// Values of the cause attribute of relock.lock.losses: the core's
// relock.LossReason values, and other for a reason this package does not
// know (one added to the core later).
const (
	CauseExpired       = string(relock.LossExpired)       // a lease ran out
	CauseGone          = string(relock.LossGone)          // Redis no longer had the hold (deleted, restart, failover)
	CauseForceUnlocked = string(relock.LossForceUnlocked) // a ForceUnlock or ForceRelease, by any process
	CauseRenewalFailed = string(relock.LossRenewalFailed) // renewals failed until the lease ran out
	CauseClientClosed  = string(relock.LossClientClosed)  // the Client was closed while holding
	CauseOther         = "other"
)

// Indexes into causes.
const (
	causeExpired = iota
	causeGone
	causeForceUnlocked
	causeRenewalFailed
	causeClientClosed
	causeOther
)

var causes = [...]string{causeExpired: CauseExpired, causeGone: CauseGone, causeForceUnlocked: CauseForceUnlocked,
	causeRenewalFailed: CauseRenewalFailed, causeClientClosed: CauseClientClosed, causeOther: CauseOther}

// kinds are the kinds whose attributes are built once: all of relock's, from
// its table of kinds. An event's lock.kind is its relock.Kind as it is.
var kinds = relock.Kinds()

// Bucket boundaries of both histograms, in seconds: from a fast round trip
// to holds of several minutes.
var buckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// An Option configures NewObserver.
type Option func(*config)

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	names bool
}

// WithMeterProvider sets where the metrics go (default: the global
// MeterProvider, otel.GetMeterProvider, at the time of NewObserver).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets where the spans go (default: the global
// TracerProvider, otel.GetTracerProvider, at the time of NewObserver).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithLockNameAttribute adds the lock's name as the attribute lock.name to
// every metric and span of a lock (default off). Turn it on only for a small,
// fixed set of names: every name is a time series of its own, and attribute
// sets are then built per event.
func WithLockNameAttribute(on bool) Option {
	return func(c *config) { c.names = on }
}

// NewObserver returns an Observer that records relock's events as
// OpenTelemetry metrics and spans. Pass it to relock.New with
// relock.WithObserver. It fails only when an instrument cannot be created.
func NewObserver(opts ...Option) (*relock.Observer, error) {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	r, err := newRecorder(cfg)
	if err != nil {
		return nil, err
	}
	return &relock.Observer{
		Acquired:              r.acquired,
		Released:              r.released,
		Renewed:               r.renewed,
		Lost:                  r.lost,
		WaitStarted:           r.waitStarted,
		WaitEnded:             r.waitEnded,
		SubscriberReconnected: r.subscriberReconnected,
		Deadlock:              r.deadlock,
	}, nil
}

type recorder struct {
	names  bool
	tracer trace.Tracer

	wait, held                                metric.Float64Histogram
	acquisitions, losses, renewals, reconnect metric.Int64Counter
	deadlocks                                 metric.Int64Counter
	holds, waiters                            metric.Int64UpDownCounter

	kinds   map[relock.Kind]*kindAttrs
	renewOK []metric.AddOption
	renewKO []metric.AddOption
}

// kindAttrs holds the measurement options of one lock kind, built once, so
// that recording allocates no attribute set.
type kindAttrs struct {
	base  []attribute.KeyValue        // lock.kind
	acq   [2][2][]metric.AddOption    // [contended][reentry]
	wait  [2][2][]metric.RecordOption // [contended][not_obtained]
	held  [2][]metric.RecordOption    // [lost]
	holds []metric.AddOption          // lock.kind only; the waiters gauge uses it too
	loss  [len(causes)][]metric.AddOption
}

func newRecorder(cfg config) (*recorder, error) {
	m := cfg.mp.Meter(ScopeName)
	r := &recorder{names: cfg.names, tracer: cfg.tp.Tracer(ScopeName)}
	var errs []error // errors.Join discards the nil ones
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	r.wait = histogram("relock.lock.wait", "Time from a Lock or TryLock call to the grant, or to giving up")
	r.held = histogram("relock.lock.held", "Time from the grant of a hold to its final Unlock or its loss")
	r.acquisitions = counter("relock.lock.acquisitions", "{acquisition}", "Successful Lock and TryLock calls, re-entries included")
	r.losses = counter("relock.lock.losses", "{loss}", "Holds that ended without Unlock")
	r.holds = upDown("relock.locks.held", "{hold}", "Holds this process has now (re-entries count once)")
	r.waiters = upDown("relock.lock.waiters", "{waiter}", "Lock calls of this process waiting for a busy lock now")
	r.renewals = counter("relock.renewals", "{renewal}", "Hold renewals by the watchdog")
	r.reconnect = counter("relock.subscriber.reconnects", "{reconnect}", "Subscriber connections that came back after they were lost")
	r.deadlocks = counter("relock.deadlocks", "{deadlock}", "Deadlocks this process broke: waits that gave up with ErrDeadlock, by the kind waited for")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("relockotel: %w", err)
	}

	r.kinds = make(map[relock.Kind]*kindAttrs, len(kinds))
	for _, k := range kinds {
		r.kinds[k] = newKindAttrs([]attribute.KeyValue{KindKey.String(string(k))})
	}
	r.renewOK = addOpts(OutcomeKey.String("ok"))
	r.renewKO = addOpts(OutcomeKey.String("failed"))
	return r, nil
}

func newKindAttrs(base []attribute.KeyValue) *kindAttrs {
	ka := &kindAttrs{base: base}
	with := func(extra ...attribute.KeyValue) []attribute.KeyValue {
		return append(append(make([]attribute.KeyValue, 0, len(base)+len(extra)), base...), extra...)
	}
	for c := range 2 {
		for x := range 2 {
			ka.acq[c][x] = addOpts(with(ContendedKey.Bool(c == 1), ReentryKey.Bool(x == 1))...)
			ka.wait[c][x] = recordOpts(with(ContendedKey.Bool(c == 1), NotObtainedKey.Bool(x == 1))...)
		}
	}
	for l := range 2 {
		ka.held[l] = recordOpts(with(LostKey.Bool(l == 1))...)
	}
	ka.holds = addOpts(base...)
	for i, c := range causes {
		ka.loss[i] = addOpts(with(CauseKey.String(c))...)
	}
	return ka
}

func addOpts(kv ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

func recordOpts(kv ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

func (r *recorder) baseOf(info relock.LockInfo) []attribute.KeyValue {
	if r.names {
		return []attribute.KeyValue{KindKey.String(string(info.Kind)), NameKey.String(info.Name)}
	}
	return []attribute.KeyValue{KindKey.String(string(info.Kind))}
}

// fast returns the options built once for the event's kind, or nil with lock
// names on or for a kind this package does not know: then add and record
// build the one option an event needs.
func (r *recorder) fast(info relock.LockInfo) *kindAttrs {
	if r.names {
		return nil
	}
	return r.kinds[info.Kind]
}

func (r *recorder) add(info relock.LockInfo, pick func(*kindAttrs) []metric.AddOption, extra ...attribute.KeyValue) []metric.AddOption {
	if ka := r.fast(info); ka != nil {
		return pick(ka)
	}
	return addOpts(append(r.baseOf(info), extra...)...)
}

func (r *recorder) record(info relock.LockInfo, pick func(*kindAttrs) []metric.RecordOption, extra ...attribute.KeyValue) []metric.RecordOption {
	if ka := r.fast(info); ka != nil {
		return pick(ka)
	}
	return recordOpts(append(r.baseOf(info), extra...)...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (r *recorder) acquired(ctx context.Context, e relock.AcquiredEvent) {
	c, x := b2i(e.Contended), b2i(e.Reentry)
	if ka := r.fast(e.LockInfo); ka != nil {
		r.acquisitions.Add(ctx, 1, ka.acq[c][x]...)
		if !e.Reentry {
			r.holds.Add(ctx, 1, ka.holds...)
			r.wait.Record(ctx, e.Wait.Seconds(), ka.wait[c][0]...)
		}
		return
	}
	base := r.baseOf(e.LockInfo)
	r.acquisitions.Add(ctx, 1, addOpts(append(base, ContendedKey.Bool(e.Contended), ReentryKey.Bool(e.Reentry))...)...)
	if !e.Reentry {
		r.holds.Add(ctx, 1, addOpts(base...)...)
		r.wait.Record(ctx, e.Wait.Seconds(), recordOpts(append(base, ContendedKey.Bool(e.Contended), NotObtainedKey.Bool(false))...)...)
	}
}

// released ends a hold at its final Unlock. One whose release Redis did not
// confirm ends too: the core gives it up and retries the release in the
// background. One that found the hold lost is left to the Lost event.
func (r *recorder) released(ctx context.Context, e relock.ReleasedEvent) {
	if !e.Final || errors.Is(e.Err, relock.ErrLockLost) {
		return
	}
	r.holds.Add(ctx, -1, r.add(e.LockInfo, func(ka *kindAttrs) []metric.AddOption { return ka.holds })...)
	r.held.Record(ctx, e.Held.Seconds(), r.record(e.LockInfo, func(ka *kindAttrs) []metric.RecordOption { return ka.held[0] }, LostKey.Bool(false))...)
}

func (r *recorder) lost(e relock.LostEvent) {
	ctx := context.Background()
	i := causeIndex(e.Reason)
	r.losses.Add(ctx, 1, r.add(e.LockInfo, func(ka *kindAttrs) []metric.AddOption { return ka.loss[i] }, CauseKey.String(causes[i]))...)
	r.holds.Add(ctx, -1, r.add(e.LockInfo, func(ka *kindAttrs) []metric.AddOption { return ka.holds })...)
	r.held.Record(ctx, e.Held.Seconds(), r.record(e.LockInfo, func(ka *kindAttrs) []metric.RecordOption { return ka.held[1] }, LostKey.Bool(true))...)
}

func (r *recorder) renewed(e relock.RenewedEvent) {
	ctx := context.Background()
	if ok := e.Holds - e.Failed; ok > 0 {
		r.renewals.Add(ctx, int64(ok), r.renewOK...)
	}
	if e.Failed > 0 {
		r.renewals.Add(ctx, int64(e.Failed), r.renewKO...)
	}
}

func (r *recorder) waitStarted(ctx context.Context, info relock.LockInfo) {
	r.waiters.Add(ctx, 1, r.add(info, func(ka *kindAttrs) []metric.AddOption { return ka.holds })...)
}

// waitEnded records the span of a wait, and the wait of a Lock that gave up
// (the wait of one that got the lock is recorded by acquired). The span is a
// child of the caller's.
func (r *recorder) waitEnded(ctx context.Context, e relock.WaitEvent) {
	r.waiters.Add(ctx, -1, r.add(e.LockInfo, func(ka *kindAttrs) []metric.AddOption { return ka.holds })...)
	if e.NotObtained {
		r.wait.Record(ctx, e.Waited.Seconds(), r.record(e.LockInfo, func(ka *kindAttrs) []metric.RecordOption { return ka.wait[1][1] },
			ContendedKey.Bool(true), NotObtainedKey.Bool(true))...)
	}
	end := time.Now()
	attrs := append(r.baseOf(e.LockInfo), AttemptsKey.Int(e.Attempts), NotObtainedKey.Bool(e.NotObtained))
	attrs = appendHolder(attrs, e.Holder)
	_, span := r.tracer.Start(ctx, "relock.wait",
		trace.WithTimestamp(end.Add(-e.Waited)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	if e.NotObtained && e.Err != nil {
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// appendHolder adds the owner and its Client's name, those known, to a
// span's attributes.
func appendHolder(attrs []attribute.KeyValue, h relock.Holder) []attribute.KeyValue {
	if h.Owner != "" {
		attrs = append(attrs, OwnerKey.String(h.Owner))
	}
	if h.ClientName != "" {
		attrs = append(attrs, ClientKey.String(h.ClientName))
	}
	return attrs
}

func (r *recorder) subscriberReconnected(relock.SubscriberEvent) {
	r.reconnect.Add(context.Background(), 1)
}

// causeIndex maps the core's loss reason to the index of its attribute
// value; a reason this package does not know is other.
func causeIndex(reason relock.LossReason) int {
	switch reason {
	case relock.LossExpired:
		return causeExpired
	case relock.LossGone:
		return causeGone
	case relock.LossForceUnlocked:
		return causeForceUnlocked
	case relock.LossRenewalFailed:
		return causeRenewalFailed
	case relock.LossClientClosed:
		return causeClientClosed
	}
	return causeOther
}

// deadlock counts a deadlock the Client broke, by the kind its victim
// waited for, and adds an event "relock.deadlock" naming the cycle's owners
// and their Clients to the span of the victim's caller, when it records.
func (r *recorder) deadlock(ctx context.Context, e relock.DeadlockEvent) {
	r.deadlocks.Add(ctx, 1, r.add(e.LockInfo, func(ka *kindAttrs) []metric.AddOption { return ka.holds })...)
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	owners, clients := make([]string, len(e.Cycle)), make([]string, len(e.Cycle))
	for i, w := range e.Cycle {
		owners[i], clients[i] = w.Owner, w.ClientName
	}
	span.AddEvent("relock.deadlock", trace.WithAttributes(append(r.baseOf(e.LockInfo),
		CycleOwnersKey.StringSlice(owners), CycleClientsKey.StringSlice(clients))...))
}
