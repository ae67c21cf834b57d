package bench

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// The CI smoke run: every library through every scenario, briefly.
func TestEveryLibraryRunsEveryScenario(t *testing.T) {
	srv := redistest.Start(t)
	goroutines := runtime.NumGoroutine()
	rep, err := Run(context.Background(), Config{Addr: srv.Addr(), Duration: 150 * time.Millisecond, Rounds: 1, Clients: 2})
	require.NoError(t, err)

	for _, sc := range Scenarios() {
		for _, lib := range Libraries() {
			res := rep.Result(sc.ID, lib.Name)
			if !sc.runs(lib.Name) {
				assert.Nil(t, res, "%s must not run %s", lib.Name, sc.ID)
				continue
			}
			require.NotNil(t, res, "%s in %s", lib.Name, sc.ID)
			assert.Positive(t, res.Ops, "%s in %s", lib.Name, sc.ID)
			assert.Zero(t, res.Violations, "%s in %s", lib.Name, sc.ID)
			assert.Zero(t, res.Errors, "%s in %s: %s", lib.Name, sc.ID, res.FirstError)
			assert.False(t, res.Stuck, "%s in %s", lib.Name, sc.ID)
			assert.GreaterOrEqual(t, res.Server, res.Sent, "%s in %s: Redis runs at least what is sent", lib.Name, sc.ID)
			assert.GreaterOrEqual(t, res.SentPerOp(), 2.0, "%s in %s: a cycle is at least Lock and Unlock", lib.Name, sc.ID)
			if !sc.OwnKeys && sc.Workers > 1 {
				assert.Len(t, res.Handoff, int(res.Ops-1), "%s in %s: one hand-off per acquisition after the first", lib.Name, sc.ID)
			}
			assert.Len(t, res.PerWorker, sc.Workers)
			assert.Len(t, res.Wait, int(res.Ops), "%s in %s: one Lock time per acquisition", lib.Name, sc.ID)
		}
	}

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), keyRoot+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "every run deletes its keys")

	// Every Locker of every run was closed: no connection but this test's
	// own is left, nor any goroutine the libraries started.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		list, err := rdb.ClientList(context.Background()).Result()
		require.NoError(c, err)
		assert.Equal(c, 1, strings.Count(strings.TrimSpace(list), "\n")+1, "connections open, this test's included")
	}, 5*time.Second, 50*time.Millisecond)
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= goroutines+2 }, 5*time.Second, 50*time.Millisecond,
		"goroutines left running: %d before the run, %d after", goroutines, runtime.NumGoroutine())

	var table, chart bytes.Buffer
	rep.WriteTable(&table)
	rep.WriteTargets(&table)
	for _, lib := range Libraries() {
		assert.Contains(t, table.String(), "| "+lib.Name+" |")
	}
	assert.Contains(t, table.String(), "hand-off p50")
	require.NoError(t, rep.WriteChart(&chart, "svg"))
	assert.Contains(t, chart.String(), "<svg")
	assert.Contains(t, chart.String(), "rueidislock")
}

// The floor sends SET and EVALSHA per cycle; Redis runs those and the
// script's GET and DEL. The counts must be exact, or no count can be trusted.
func TestCommandsAreCountedExactly(t *testing.T) {
	srv := redistest.Start(t)
	rep, err := Run(context.Background(), Config{
		Addr: srv.Addr(), Duration: 100 * time.Millisecond, Rounds: 1, Clients: 1,
		Libraries: []Library{floorLibrary()}, Scenarios: Scenarios()[:1],
	})
	require.NoError(t, err)
	res := rep.Result(Uncontended, FloorName)
	require.Positive(t, res.Ops)
	assert.Equal(t, 2*res.Ops, res.Sent)
	assert.Equal(t, 4*res.Ops, res.Server)
}

// brokenLocker "locks" without asking anyone.
type brokenLocker struct{}

func (brokenLocker) Lock(context.Context, string) (Unlocker, error) { return brokenHold{}, nil }
func (brokenLocker) Close() error                                   { return nil }

type brokenHold struct{}

func (brokenHold) Unlock(context.Context) error { return nil }

// The mutual-exclusion check must see a lock that excludes no one.
func TestMutualExclusionCheckCatchesABrokenLock(t *testing.T) {
	for _, sc := range Scenarios() {
		if sc.OwnKeys || sc.Workers == 1 {
			continue
		}
		t.Run(sc.ID, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			res := workload(ctx, sc, []Locker{brokenLocker{}, brokenLocker{}})
			assert.Positive(t, res.Ops)
			assert.Positive(t, res.Violations)
			assert.Nil(t, res.Handoff, "no hand-off order exists without exclusion")
		})
	}
}

func TestHandoffsFollowHoldOrder(t *testing.T) {
	ms := time.Millisecond
	gaps, back, waiter := handoffs([][]cycle{
		{
			{worker: 0, seq: 0, called: 0, locked: 0, releasing: 900 * time.Microsecond, unlocked: 1 * ms},
			{worker: 0, seq: 1, called: 1 * ms, locked: 2 * ms, releasing: 2 * ms, unlocked: 3 * ms},
		},
		{
			// Waiting since 1 ms, before worker 0 released at 2 ms.
			{worker: 1, seq: 2, called: 1 * ms, locked: 7 * ms, releasing: 7 * ms, unlocked: 8 * ms},
			{worker: 1, seq: 3, called: 7900 * time.Microsecond, locked: 7900 * time.Microsecond, releasing: 8 * ms, unlocked: 9 * ms},
		},
	})
	assert.Equal(t, []time.Duration{1 * ms, 4 * ms, 0}, gaps, "a Lock returning before the previous Unlock counts as 0")
	assert.Equal(t, int64(2), back)
	assert.Equal(t, int64(1), waiter, "only worker 1's first hold went to a waiter")
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i))
	}
	assert.Equal(t, time.Duration(50), Percentile(s, 50))
	assert.Equal(t, time.Duration(99), Percentile(s, 99))
	assert.Equal(t, time.Duration(100), Percentile(s, 100))
	assert.Equal(t, time.Duration(-1), Percentile(nil, 50))
}

func TestTableShowsRatiosAgainstTheFloor(t *testing.T) {
	rep := &Report{
		Config: Config{Libraries: []Library{floorLibrary(), relockLibrary()}, Scenarios: Scenarios()[:1]},
		Results: map[string]map[string]*Result{Uncontended: {
			FloorName: {Ops: 100, Elapsed: time.Second, Latency: []time.Duration{100 * time.Microsecond}, Sent: 200, Server: 400},
			"relock":  {Ops: 80, Elapsed: time.Second, Latency: []time.Duration{125 * time.Microsecond}, Sent: 160, Server: 880},
		}},
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	out := b.String()
	assert.Contains(t, out, "| 100 µs | 125 µs (1.25×) |")
	assert.Contains(t, out, "| 100/s | 80/s (0.80×) |")
	assert.Contains(t, out, "| 4.00 | 11.00 (2.75×) |")
	assert.Equal(t, 2+5, strings.Count(out, "\n"), "header, separator and 5 metrics")
}

// Where the seed lock ran, the one-caller scenarios get a row of ratios
// against it (the floor for a reentrant lock).
func TestTableShowsRatiosAgainstTheSeed(t *testing.T) {
	rep := &Report{
		Config: Config{Libraries: []Library{floorLibrary(), seedLibrary(), relockLibrary()}, Scenarios: Scenarios()[:1]},
		Results: map[string]map[string]*Result{Uncontended: {
			FloorName: {Ops: 100, Elapsed: time.Second, Latency: []time.Duration{100 * time.Microsecond}, Sent: 200, Server: 400},
			SeedName:  {Ops: 90, Elapsed: time.Second, Latency: []time.Duration{110 * time.Microsecond}, Sent: 180, Server: 720},
			"relock":  {Ops: 81, Elapsed: time.Second, Latency: []time.Duration{125 * time.Microsecond}, Sent: 162, Server: 891},
		}},
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	assert.Contains(t, b.String(), "| cycles/s ÷ the seed lock's | 1.11× | 1.00× | 0.90× |")
	b.Reset()
	rep.WriteTargets(&b)
	assert.Contains(t, b.String(), "relock: cycles/s at least 0.95× the seed lock's: 0.90×")
}

// One starved round must not set a library's rate.
func TestRateIsTheMedianOfTheRounds(t *testing.T) {
	r := &Result{Ops: 100, Elapsed: time.Second, Rates: []float64{100}}
	r.merge(&Result{Ops: 10, Elapsed: time.Second, Rates: []float64{10}})
	r.merge(&Result{Ops: 120, Elapsed: time.Second, Rates: []float64{120}})
	assert.InDelta(t, 100, r.Rate(), 1e-9)
	r.merge(&Result{Ops: 110, Elapsed: time.Second, Rates: []float64{110}})
	assert.InDelta(t, 105, r.Rate(), 1e-9)
	assert.InDelta(t, 85, r.totalRate(), 1e-9)
}
