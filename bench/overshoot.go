package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// The deadline overshoot run: how late each library's blocking
// Lock returns after its context's deadline when Redis is hung, refuses
// connections, is slow, or sits behind a half-open connection, and with
// which error. Every library runs on a go-redis client with default options
// (3 s read timeout, 5 s dial timeout), as a new user's would.

// OvershootConfig is one overshoot run.
type OvershootConfig struct {
	Trials   int           // per fault and library
	Parallel int           // trials run at once (each its own client), per library
	Deadline time.Duration // of each Lock's context
	Delay    time.Duration // of the slow fault's replies
	Libs     []OvershootLib
	Progress io.Writer
}

// OvershootLib is one library's natural blocking acquire.
type OvershootLib struct {
	Name string
	// New connects a client (default go-redis options) to addr.
	New func(addr string) (OvershootLocker, error)
	// Class names the error a Lock returned, as its users would test it.
	Class func(error) string
}

// OvershootLocker is one client of a library.
type OvershootLocker interface {
	// Lock acquires name, blocking until ctx ends, and returns its release.
	Lock(ctx context.Context, name string) (release func(context.Context) error, err error)
	// Held reports whether name is held or waited for in Redis.
	Held(ctx context.Context, name string) (bool, error)
	Close() error
}

// Trial is one Lock call under a fault.
type Trial struct {
	Overshoot time.Duration // return time − deadline; negative: returned before it
	Class     string        // the error's class, or "obtained" when Lock succeeded
	// LeftHeld: Lock failed, yet the lock was still held (or waited for) in
	// Redis leftHeldWait after the fault healed (or it could not be told).
	LeftHeld bool
}

// OvershootResult is one library's trials under one fault.
type OvershootResult struct {
	Fault, Library string
	Trials         []Trial
	Checked        bool // whether LeftHeld was checked (not without a Redis)
}

// Fault is a way Redis fails during a Lock.
type Fault struct {
	Name string
	// Addr is where the clients connect; Warm says whether they lock and
	// unlock once before the fault, so that their connections are open.
	Addr        string
	Warm        bool
	Apply, Heal func() error
	// NoRedis: no Redis is behind Addr, so nothing can be left held.
	NoRedis bool
}

// OvershootLibraries returns relock, bsm/redislock and redsync, each with
// the blocking acquire of the comparison benchmark.
func OvershootLibraries() []OvershootLib {
	return []OvershootLib{
		{Name: "relock", New: newRelockOvershoot, Class: relockClass},
		{Name: "redislock", New: newRedislockOvershoot, Class: peerClass},
		{Name: "redsync", New: newRedsyncOvershoot, Class: peerClass},
	}
}

// Faults returns the four faults of the overshoot run on srv, proxy (in front of
// srv) and refused (an address nothing listens on).
func Faults(srv *redistest.Server, proxy *redistest.Proxy, refused string, delay time.Duration) []Fault {
	nop := func() error { return nil }
	return []Fault{
		{Name: "Redis hung (SIGSTOP)", Addr: srv.Addr(), Warm: true,
			Apply: func() error { srv.Pause(); return nil },
			Heal:  func() error { srv.Resume(); return nil }},
		{Name: "connection refused", Addr: refused, Apply: nop, Heal: nop, NoRedis: true},
		{Name: fmt.Sprintf("slow: replies %v late", delay), Addr: proxy.Addr(), Warm: true,
			Apply: func() error { proxy.SetReplyDelay(delay); return nil },
			Heal:  func() error { proxy.SetReplyDelay(0); return nil }},
		{Name: "half-open (open connections blackholed)", Addr: proxy.Addr(), Warm: true,
			Apply: func() error { proxy.Blackhole(); return nil },
			Heal:  func() error { proxy.CutBlackholed(); return nil }},
	}
}

// RefusedAddr returns a loopback address nothing listens on.
func RefusedAddr() (string, error) {
	port, err := redistest.FreePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// RunOvershoot runs cfg.Trials Lock calls per fault and library, in batches
// of cfg.Parallel per library. A batch's clients connect (and warm up)
// while Redis is healthy; the fault is applied; every library's trials of
// the batch start 10 ms apart, so that their deadlines do not all fall in
// the same instant on a 2-core machine; then the fault heals, what was
// obtained is released and the clients are closed.
func RunOvershoot(ctx context.Context, cfg OvershootConfig, faults []Fault) ([]OvershootResult, error) {
	cfg.Parallel = max(1, min(cfg.Parallel, cfg.Trials))
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	var out []OvershootResult
	for _, f := range faults {
		byLib := make([]OvershootResult, len(cfg.Libs))
		for i, l := range cfg.Libs {
			byLib[i] = OvershootResult{Fault: f.Name, Library: l.Name, Checked: !f.NoRedis}
		}
		for done := 0; done < cfg.Trials; done += cfg.Parallel {
			n := min(cfg.Parallel, cfg.Trials-done)
			trials, err := overshootBatch(ctx, cfg, f, n)
			if err != nil {
				return nil, fmt.Errorf("bench: overshoot, %s: %w", f.Name, err)
			}
			for i := range byLib {
				byLib[i].Trials = append(byLib[i].Trials, trials[i]...)
			}
			fmt.Fprintf(cfg.Progress, "overshoot  %-40s %d/%d trials\n", f.Name, done+n, cfg.Trials)
		}
		out = append(out, byLib...)
	}
	return out, nil
}

// batchClient is one client of a batch, its trial's lock name and what
// the trial obtained.
type batchClient struct {
	lib     int
	l       OvershootLocker
	name    string
	release func(context.Context) error
}

// batchSeq numbers the batches, so that no batch's lock names are those of
// a lock an earlier batch left held.
var batchSeq atomic.Int64

// overshootBatch runs n trials per library under fault f; trials[i] are
// library i's.
func overshootBatch(ctx context.Context, cfg OvershootConfig, f Fault, n int) ([][]Trial, error) {
	clients, err := batchClients(ctx, cfg, f, n)
	defer closeBatch(clients)
	if err != nil {
		return nil, err
	}
	if err := f.Apply(); err != nil {
		return nil, err
	}
	trials := make([][]Trial, len(cfg.Libs))
	for i := range trials {
		trials[i] = make([]Trial, n)
	}
	var wg sync.WaitGroup
	for k, c := range clients {
		wg.Go(func() {
			time.Sleep(time.Duration(k) * 10 * time.Millisecond) // stagger the deadlines
			trials[c.lib][k/len(cfg.Libs)] = runTrial(ctx, cfg, c)
		})
	}
	wg.Wait()
	if err := f.Heal(); err != nil {
		return nil, err
	}
	if !f.NoRedis {
		markLeftHeld(ctx, clients, trials, len(cfg.Libs))
	}
	return trials, nil
}

// runTrial is one Lock with cfg.Deadline on c's client.
func runTrial(ctx context.Context, cfg OvershootConfig, c *batchClient) Trial {
	deadline := time.Now().Add(cfg.Deadline)
	tctx, cancel := context.WithDeadline(ctx, deadline)
	release, err := c.l.Lock(tctx, c.name)
	back := time.Now()
	cancel()
	t := Trial{Overshoot: back.Sub(deadline)}
	switch {
	case err != nil:
		t.Class = cfg.Libs[c.lib].Class(err)
	case back.After(deadline):
		t.Class, c.release = "obtained after the deadline", release
	default:
		t.Class, c.release = "obtained", release
	}
	return t
}

// leftHeldWait is how long, once the fault healed, a lock whose Lock
// failed may stay held before the trial counts it as left held: a library
// that reconciles a request still in flight does so in well under it.
const leftHeldWait = 3 * time.Second

// markLeftHeld sets LeftHeld on the failed trials whose lock is still held
// (or waited for) leftHeldWait after the fault healed, or whose state
// cannot be read by then.
func markLeftHeld(ctx context.Context, clients []*batchClient, trials [][]Trial, libs int) {
	until := time.Now().Add(leftHeldWait)
	for {
		pending := 0
		for k, c := range clients {
			t := &trials[c.lib][k/libs]
			if c.release != nil {
				continue
			}
			hctx, cancel := context.WithTimeout(ctx, time.Second)
			held, err := c.l.Held(hctx, c.name)
			cancel()
			t.LeftHeld = held || err != nil
			if t.LeftHeld {
				pending++
			}
		}
		if pending == 0 || time.Now().After(until) {
			return
		}
		time.Sleep(50 * time.Millisecond) // no signal exists for a key's going
	}
}

// closeBatch releases what the trials obtained and closes the clients.
func closeBatch(clients []*batchClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			if c.release != nil {
				_ = c.release(ctx)
			}
			_ = c.l.Close()
		})
	}
	wg.Wait()
}

// batchClients connects n clients per library, interleaved (client k is
// library k mod len(Libs)), warming them up when f says so.
func batchClients(ctx context.Context, cfg OvershootConfig, f Fault, n int) ([]*batchClient, error) {
	var clients []*batchClient
	seq := batchSeq.Add(1)
	for k := range n * len(cfg.Libs) {
		lib := k % len(cfg.Libs)
		l, err := cfg.Libs[lib].New(f.Addr)
		if err != nil {
			return clients, err
		}
		c := &batchClient{lib: lib, l: l, name: fmt.Sprintf("overshoot:%d:%d", seq, k)}
		clients = append(clients, c)
		if !f.Warm {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		release, err := l.Lock(wctx, fmt.Sprintf("warmup:%d", k))
		if err == nil {
			err = release(wctx)
		}
		cancel()
		if err != nil {
			return clients, fmt.Errorf("%s warm-up: %w", cfg.Libs[lib].Name, err)
		}
	}
	return clients, nil
}

// overshootPrefix starts the overshoot run's keys.
const overshootPrefix = keyRoot + "overshoot:"

type relockOvershoot struct {
	rdb *redis.Client
	c   *relock.Client
}

func newRelockOvershoot(addr string) (OvershootLocker, error) {
	rdb := newGoredis(addr, nil)
	return relockOvershoot{rdb, relock.New(rdb, relock.WithKeyPrefix(overshootPrefix+"relock"))}, nil
}

func (r relockOvershoot) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	l := r.c.Lock(name)
	held, err := l.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { return l.Unlock(held) }, nil
}

func (r relockOvershoot) Held(ctx context.Context, name string) (bool, error) {
	st, err := r.c.Inspect(ctx, name)
	if err != nil {
		return false, err
	}
	return st.Exists(), nil
}

func (r relockOvershoot) Close() error { return errors.Join(r.c.Close(), r.rdb.Close()) }

type redislockOvershoot struct {
	rdb *redis.Client
	c   *redislock.Client
}

func newRedislockOvershoot(addr string) (OvershootLocker, error) {
	rdb := newGoredis(addr, nil)
	return redislockOvershoot{rdb, redislock.New(rdb)}, nil
}

// Lock is Obtain with the comparison's retry strategy (its default, NoRetry,
// does not block).
func (r redislockOvershoot) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	l, err := r.c.Obtain(ctx, overshootPrefix+"redislock:"+name, floorLease, &redislock.Options{
		RetryStrategy: redislock.ExponentialBackoff(redislockMinBackoff, redislockMaxBackoff),
	})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (r redislockOvershoot) Held(ctx context.Context, name string) (bool, error) {
	n, err := r.rdb.Exists(ctx, overshootPrefix+"redislock:"+name).Result()
	return n > 0, err
}

func (r redislockOvershoot) Close() error { return r.rdb.Close() }

type redsyncOvershoot struct {
	rdb *redis.Client
	rs  *redsync.Redsync
}

func newRedsyncOvershoot(addr string) (OvershootLocker, error) {
	rdb := newGoredis(addr, nil)
	return redsyncOvershoot{rdb, redsync.New(goredis.NewPool(rdb))}, nil
}

// Lock is one LockContext with redsync's defaults (32 tries 50–250 ms
// apart: longer than the deadline, so the deadline is what ends it).
func (r redsyncOvershoot) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(overshootPrefix + "redsync:" + name)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
}

func (r redsyncOvershoot) Held(ctx context.Context, name string) (bool, error) {
	n, err := r.rdb.Exists(ctx, overshootPrefix+"redsync:"+name).Result()
	return n > 0, err
}

func (r redsyncOvershoot) Close() error { return r.rdb.Close() }

// relockClass names relock's sentinels the error wraps.
func relockClass(err error) string {
	var parts []string
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrNotObtained", relock.ErrNotObtained},
		{"ErrUnavailable", relock.ErrUnavailable},
		{"DeadlineExceeded", context.DeadlineExceeded},
	} {
		if errors.Is(err, s.err) {
			parts = append(parts, s.name)
		}
	}
	if len(parts) == 0 {
		return "other: " + short(err)
	}
	return strings.Join(parts, "+")
}

// peerClass names what a peer's error says: the deadline, its own
// not-obtained error, or the network error go-redis passed on.
func peerClass(err error) string {
	var ne net.Error
	var taken *redsync.ErrTaken
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.Is(err, redislock.ErrNotObtained):
		return "redislock.ErrNotObtained"
	case errors.Is(err, redsync.ErrFailed):
		return "redsync.ErrFailed"
	case errors.As(err, &taken):
		return "redsync.ErrTaken"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "i/o timeout"
	}
	return "other: " + short(err)
}

func short(err error) string {
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// WriteOvershootTable writes the results as a markdown table: p50, p99 and
// max of (return − deadline), and how the calls returned.
func WriteOvershootTable(w io.Writer, results []OvershootResult) {
	fmt.Fprintf(w, "| fault | library | p50 | p99 | max | returned (trials) | failed, yet held %v after recovery |\n", leftHeldWait)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|---:|")
	for _, r := range results {
		d := make([]time.Duration, len(r.Trials))
		left := 0
		for i, t := range r.Trials {
			d[i] = t.Overshoot
			if t.LeftHeld {
				left++
			}
		}
		leftCell := "n/a"
		if r.Checked {
			leftCell = fmt.Sprint(left)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Fault, r.Library,
			fmtSigned(Percentile(d, 50)), fmtSigned(Percentile(d, 99)), fmtSigned(Percentile(d, 100)), classCounts(r.Trials), leftCell)
	}
}

// classCounts is "n× class" per class, the most frequent first.
func classCounts(trials []Trial) string {
	counts := make(map[string]int)
	for _, t := range trials {
		counts[t.Class]++
	}
	classes := make([]string, 0, len(counts))
	for c := range counts {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool {
		if counts[classes[i]] != counts[classes[j]] {
			return counts[classes[i]] > counts[classes[j]]
		}
		return classes[i] < classes[j]
	})
	parts := make([]string, len(classes))
	for i, c := range classes {
		parts[i] = fmt.Sprintf("%d× %s", counts[c], c)
	}
	return strings.Join(parts, "; ")
}

// fmtSigned formats a duration that may be negative (returned before the
// deadline).
func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDuration(float64(-d))
	}
	return "+" + fmtDuration(float64(d))
}
