package bench

import (
	"math"
	"slices"
	"time"
)

// Result is what one library did in one scenario, summed over the rounds.
type Result struct {
	Library, Scenario string

	Ops     int64         // completed Lock…Unlock cycles
	Elapsed time.Duration // wall time of the runs
	Rates   []float64     // cycles per second of each round's run
	// Latency holds one Lock+Unlock time per cycle (1-worker scenarios).
	Latency []time.Duration
	// Wait holds, for every acquisition, the time its Lock call took (from
	// the call to its return; with Depth > 1, the re-entries too): the
	// queueing a worker sees, hand-offs to others included.
	Wait []time.Duration
	// Handoff holds, for each acquisition of a shared key after the first,
	// the hand-off time: from the moment the previous holder's Unlock
	// returned to the moment this acquisition's Lock returned, both read on
	// the benchmark's one monotonic clock (every "process" is in the same OS
	// process, so the two ends are comparable). "Previous" is in hold order,
	// taken from a sequence number read inside the critical section. It is
	// the time the lock stood idle as the applications see it: the release's
	// reply, the wake-up or poll, the next attempt's round trip. It is 0 when
	// this Lock returned first (the release had taken effect in Redis before
	// its reply reached the releaser). In a free-for-all the next holder may
	// be the releaser itself (see Reacquired).
	Handoff   []time.Duration
	PerWorker []int64 // cycles per worker
	// Reacquired counts the acquisitions of a shared key by the worker that
	// held it just before: the releaser took it back ahead of the waiters.
	Reacquired int64
	// ToWaiter counts the acquisitions of a shared key by a worker whose
	// Lock call started before the previous holder called Unlock: hand-offs
	// to a waiter, as opposed to a newcomer or the releaser grabbing a free
	// lock.
	ToWaiter int64

	// Violations counts acquisitions that found another holder inside the
	// critical section, or whose update of a shared counter was lost.
	Violations int64
	Errors     int64 // failed Lock or Unlock calls, other than the run's end
	FirstError string
	Stuck      bool // workers did not return within the grace period

	Sent   int64 // commands that crossed the network
	Server int64 // commands Redis executed, scripts' inner calls included
}

func (r *Result) merge(o *Result) {
	r.Ops += o.Ops
	r.Elapsed += o.Elapsed
	r.Rates = append(r.Rates, o.Rates...)
	r.Latency = append(r.Latency, o.Latency...)
	r.Wait = append(r.Wait, o.Wait...)
	r.Handoff = append(r.Handoff, o.Handoff...)
	r.Reacquired += o.Reacquired
	r.ToWaiter += o.ToWaiter
	if r.PerWorker == nil {
		r.PerWorker = make([]int64, len(o.PerWorker))
	}
	for i, n := range o.PerWorker {
		r.PerWorker[i] += n
	}
	r.Violations += o.Violations
	r.Errors += o.Errors
	if r.FirstError == "" {
		r.FirstError = o.FirstError
	}
	r.Stuck = r.Stuck || o.Stuck
	r.Sent += o.Sent
	r.Server += o.Server
}

// Rate is cycles per second: the median of the rounds' rates. On the
// shared machine a round sometimes runs at a fraction of the others' rate
// (seen: the floor at 16 processes, 80/s in one round and 600-1400/s in the
// five others, as other tenants' load starved its polling threads); the
// median keeps such a round from setting a library's figure, the sum of all
// rounds would not.
func (r *Result) Rate() float64 {
	if len(r.Rates) == 0 {
		return r.totalRate()
	}
	rates := slices.Clone(r.Rates)
	slices.Sort(rates)
	n := len(rates)
	if n%2 == 1 {
		return rates[n/2]
	}
	return (rates[n/2-1] + rates[n/2]) / 2
}

// totalRate is all rounds' cycles over all rounds' time.
func (r *Result) totalRate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// SentPerOp is commands sent per cycle.
func (r *Result) SentPerOp() float64 { return perOp(r.Sent, r.Ops) }

// ServerPerOp is commands Redis executed per cycle.
func (r *Result) ServerPerOp() float64 { return perOp(r.Server, r.Ops) }

func perOp(n, ops int64) float64 {
	if ops == 0 {
		return math.NaN()
	}
	return float64(n) / float64(ops)
}

// Fairness is the most cycles one worker did over the fewest (+Inf when a
// worker did none).
func (r *Result) Fairness() float64 {
	if len(r.PerWorker) == 0 {
		return math.NaN()
	}
	lo, hi := slices.Min(r.PerWorker), slices.Max(r.PerWorker)
	if lo == 0 {
		return math.Inf(1)
	}
	return float64(hi) / float64(lo)
}

// Percentile returns the p-th percentile (0 < p <= 100) of samples, sorting
// them, or -1 when there are none.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return -1
	}
	slices.Sort(samples)
	i := int(math.Ceil(p/100*float64(len(samples)))) - 1
	return samples[max(0, min(i, len(samples)-1))]
}
