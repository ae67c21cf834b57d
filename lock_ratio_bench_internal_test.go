package relock

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// BenchmarkUncontendedRatios runs the variants of BenchmarkUncontendedParts
// in alternation and reports each one's speed as a ratio to the seed
// lock's: the median over rounds of the seed's time per cycle ÷ the
// variant's, each round running every variant for 500 cycles, one after
// the other, starting one variant later each round. On a shared machine,
// whose speed drifts by a third between runs a few seconds apart, a ratio
// taken within a round is steadier than ns/op taken from separate runs.
// RELOCK_RATIO_ROUNDS sets the rounds (default 40), RELOCK_PARTS_DEADLINE
// the context (a timeout of its own per cycle, as a service's request
// has; unset: context.Background()). Run it with -benchtime 1x. It also
// reports the process's CPU per cycle of client and inline as a ratio to
// the seed lock's (cpu÷seed: more is dearer), taken the same way.
//
// The gaps between the variants tell what an uncontended cycle costs
// beyond the seed lock's: stubs ÷ seed the round trips with relock's keys
// and arguments, scripts − stubs relock's scripts inside Redis, client −
// scripts the Client's own work on the caller's goroutine.
func BenchmarkUncontendedRatios(b *testing.B) {
	rounds, err := strconv.Atoi(os.Getenv("RELOCK_RATIO_ROUNDS"))
	if err != nil || rounds <= 0 {
		rounds = 40
	}
	perCall, _ := time.ParseDuration(os.Getenv("RELOCK_PARTS_DEADLINE"))
	srv := redistest.Start(b)
	variants := []string{"seed", "floor", "stubs", "scripts", "client", "inline"}
	cycles := make([]func(context.Context) error, len(variants))
	for i, v := range variants {
		rdb := partsRedis(srv, v)
		c := partsClient(rdb, v)
		b.Cleanup(func() { _ = c.Close() })
		cycles[i] = withDeadline(partsCycle(c, rdb, v, "ratio"), perCall)
		if err := cycles[i](context.Background()); err != nil { // loads the scripts
			b.Fatal(err)
		}
	}
	speed := make([][]float64, len(variants))
	cpu := make([][]float64, len(variants))
	for b.Loop() {
		for r := range rounds {
			wall := make([]time.Duration, len(variants))
			used := make([]time.Duration, len(variants))
			for j := range variants {
				i := (j + r) % len(variants)
				wall[i], used[i] = timeCycles(b, cycles[i], 500)
			}
			for i := range variants {
				speed[i] = append(speed[i], float64(wall[0])/float64(wall[i]))
				cpu[i] = append(cpu[i], float64(used[i])/float64(used[0]))
			}
		}
	}
	for i, v := range variants[1:] {
		b.ReportMetric(median(speed[i+1]), v+"÷seed")
	}
	b.ReportMetric(median(cpu[4]), "client-cpu÷seed")
	b.ReportMetric(median(cpu[5]), "inline-cpu÷seed")
}

// timeCycles runs n cycles and returns the time each took on average, and
// this process's CPU time each used (the Redis server is another process).
func timeCycles(b *testing.B, cycle func(context.Context) error, n int) (wall, cpu time.Duration) {
	cpu0, start := processCPUOrZero(), time.Now()
	for range n {
		if err := cycle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n), (processCPUOrZero() - cpu0) / time.Duration(n)
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
