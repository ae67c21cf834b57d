package bench

import (
	"fmt"
	"io"
	"sort"
)

// The targets, checked on the one run's ratios.
const (
	targetUncontended = 1.15 // relock's uncontended p50 ÷ the floor's, at most
	targetHandoff     = 10   // a polling library's hand-off p50 ÷ relock's, at least
	targetCommands    = 4    // commands relock sends per contended acquisition, at most
)

// pollers are the libraries that wait by polling with a backoff.
var pollers = []string{"redsync", "redislock"}

// WriteTargets writes the targets with the run's numbers, as a
// markdown list.
func (r *Report) WriteTargets(w io.Writer) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	if rl, fl := r.Result(Uncontended, "relock"), r.Result(Uncontended, FloorName); rl != nil && fl != nil {
		x := float64(Percentile(rl.Latency, 50)) / float64(Percentile(fl.Latency, 50))
		y := fl.Rate() / rl.Rate()
		fmt.Fprintf(w, "- Uncontended Lock+Unlock within %.2f× the floor: p50 %.2f×, cycles/s %.2f× fewer — %s\n",
			targetUncontended, x, y, verdict(x <= targetUncontended))
	}
	if rl := r.Result(OneKey, "relock"); rl != nil {
		mine := Percentile(rl.Handoff, 50)
		for _, p := range pollers {
			pr := r.Result(OneKey, p)
			if pr == nil || mine <= 0 {
				continue
			}
			x := float64(Percentile(pr.Handoff, 50)) / float64(mine)
			fmt.Fprintf(w, "- Contended hand-off p50 at least %d× faster than %s: %.0f× (%s vs %s) — %s\n",
				targetHandoff, p, x, fmtDuration(float64(Percentile(pr.Handoff, 50))), fmtDuration(float64(mine)),
				verdict(x >= targetHandoff))
		}
		fmt.Fprintf(w, "- At most %d Redis commands per contended acquisition: %.2f sent (%.2f run by Redis, scripts' inner calls included) — %s\n",
			targetCommands, rl.SentPerOp(), rl.ServerPerOp(), verdict(rl.SentPerOp() <= targetCommands))
	}
	var bad []string
	for id, byLib := range r.Results {
		for lib, res := range byLib {
			if res.Violations > 0 {
				bad = append(bad, fmt.Sprintf("%s in %s: %d", lib, id, res.Violations))
			}
		}
	}
	sort.Strings(bad)
	if len(bad) == 0 {
		fmt.Fprintf(w, "- No mutual-exclusion violation in any scenario, for any library — met\n")
	} else {
		fmt.Fprintf(w, "- Mutual-exclusion violations: %v — **missed** for those libraries\n", bad)
	}
}

// WriteSetup writes what the run was measured on and how each library
// waits, as a markdown list.
func (r *Report) WriteSetup(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "- Redis %s at %s; %s, %d CPUs; %d round(s) of %v per library and scenario; %d client(s) (\"processes\") per library\n",
		r.RedisVersion, c.Addr, r.GoVersion, r.CPUs, c.Rounds, c.Duration, c.Clients)
	paths := make([]string, 0, len(r.Versions))
	for p := range r.Versions {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "- %s %s\n", p, r.Versions[p])
	}
	for _, l := range c.Libraries {
		fmt.Fprintf(w, "- **%s**: %s\n", l.Name, l.Strategy)
	}
}
