package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// metric is one row of the table.
type metric struct {
	scenario, label string
	value           func(*Result, Scenario) float64
	format          func(float64) string
	// noRatio: the value is shown alone (counts of violations and errors).
	noRatio bool
}

func durationOf(f func(*Result) time.Duration) func(*Result, Scenario) float64 {
	return func(r *Result, _ Scenario) float64 {
		d := f(r)
		if d < 0 {
			return math.NaN()
		}
		return float64(d)
	}
}

func fmtDuration(v float64) string {
	d := time.Duration(v)
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	}
}

func fmtRate(v float64) string  { return fmt.Sprintf("%.0f/s", v) }
func fmtCount(v float64) string { return fmt.Sprintf("%.2f", v) }
func fmtInt(v float64) string   { return fmt.Sprintf("%.0f", v) }

func fmtFairness(v float64) string {
	if math.IsInf(v, 1) {
		return "∞ (a worker got none)"
	}
	return fmt.Sprintf("%.2f", v)
}

func metrics() []metric {
	p50 := durationOf(func(r *Result) time.Duration { return Percentile(r.Latency, 50) })
	p99 := durationOf(func(r *Result) time.Duration { return Percentile(r.Latency, 99) })
	rate := func(r *Result, _ Scenario) float64 { return r.Rate() }
	sent := func(r *Result, _ Scenario) float64 { return r.SentPerOp() }
	server := func(r *Result, _ Scenario) float64 { return r.ServerPerOp() }
	viol := func(r *Result, _ Scenario) float64 { return float64(r.Violations) }
	return []metric{
		{scenario: Uncontended, label: "Lock+Unlock p50", value: p50, format: fmtDuration},
		{scenario: Uncontended, label: "Lock+Unlock p99", value: p99, format: fmtDuration},
		{scenario: Uncontended, label: "cycles/s", value: rate, format: fmtRate},
		{scenario: Uncontended, label: "commands sent / cycle", value: sent, format: fmtCount},
		{scenario: Uncontended, label: "commands run by Redis / cycle", value: server, format: fmtCount},
		{scenario: ManyKeys, label: "cycles/s", value: rate, format: fmtRate},
		{scenario: ManyKeys, label: "commands sent / cycle", value: sent, format: fmtCount},
		{scenario: OneKey, label: "acquisitions/s", value: rate, format: fmtRate},
		{scenario: OneKey, label: "hand-off p50", value: durationOf(func(r *Result) time.Duration { return Percentile(r.Handoff, 50) }), format: fmtDuration},
		{scenario: OneKey, label: "hand-off p99", value: durationOf(func(r *Result) time.Duration { return Percentile(r.Handoff, 99) }), format: fmtDuration},
		{scenario: OneKey, label: "commands sent / acquisition", value: sent, format: fmtCount},
		{scenario: OneKey, label: "commands run by Redis / acquisition", value: server, format: fmtCount},
		{scenario: OneKey, label: "mutual-exclusion violations", value: viol, format: fmtInt, noRatio: true},
		{scenario: Hold2ms, label: "acquisitions/s", value: rate, format: fmtRate},
		{scenario: Hold2ms, label: "share of the 500/s ideal", value: func(r *Result, sc Scenario) float64 {
			return r.Rate() / sc.IdealRate()
		}, format: func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }},
		{scenario: Hold2ms, label: "hand-off p50", value: durationOf(func(r *Result) time.Duration { return Percentile(r.Handoff, 50) }), format: fmtDuration},
		{scenario: Hold2ms, label: "taken back by the releaser", value: func(r *Result, _ Scenario) float64 {
			return float64(r.Reacquired) / float64(max(1, r.Ops-1))
		}, format: func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }, noRatio: true},
		{scenario: Hold2ms, label: "fairness: max/min acquisitions per goroutine", value: func(r *Result, _ Scenario) float64 { return r.Fairness() }, format: fmtFairness},
		{scenario: Hold2ms, label: "commands sent / acquisition", value: sent, format: fmtCount},
		{scenario: Hold2ms, label: "mutual-exclusion violations", value: viol, format: fmtInt, noRatio: true},
		{scenario: Reentrant3, label: "3×Lock + 3×Unlock p50", value: p50, format: fmtDuration},
		{scenario: Reentrant3, label: "3×Lock + 3×Unlock p99", value: p99, format: fmtDuration},
		{scenario: Reentrant3, label: "cycles/s", value: rate, format: fmtRate},
		{scenario: Reentrant3, label: "commands sent / cycle", value: sent, format: fmtCount},
	}
}

// baselineOf returns the floor result a ratio of scenario sc is taken
// against.
func (r *Report) baselineOf(sc Scenario) *Result {
	id := sc.ID
	if sc.Baseline != "" {
		id = sc.Baseline
	}
	return r.Result(id, FloorName)
}

func (r *Report) scenario(id string) (Scenario, bool) {
	for _, sc := range r.Config.Scenarios {
		if sc.ID == id {
			return sc, true
		}
	}
	return Scenario{}, false
}

// WriteTable writes the results as a markdown table: one column per
// library, each cell the value and, in parentheses, its ratio to the floor's
// (library ÷ floor; for scenario 5, to the floor's uncontended cycle).
func (r *Report) WriteTable(w io.Writer) {
	libs := r.Config.Libraries
	fmt.Fprintf(w, "| scenario | metric |")
	for _, l := range libs {
		fmt.Fprintf(w, " %s |", l.Name)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(libs)))
	for _, m := range r.rows() {
		sc, _ := r.scenario(m.scenario)
		base := r.baselineOf(sc)
		fmt.Fprintf(w, "| %s | %s |", sc.Title, m.label)
		for _, l := range libs {
			res := r.Result(m.scenario, l.Name)
			fmt.Fprintf(w, " %s |", cell(m, sc, res, base))
		}
		fmt.Fprintln(w)
	}
}

// rows is metrics() for the scenarios that ran, plus an errors row for each
// scenario in which some library had errors or got stuck.
func (r *Report) rows() []metric {
	var out []metric
	for _, sc := range r.Config.Scenarios {
		if r.Results[sc.ID] == nil {
			continue
		}
		for _, m := range metrics() {
			if m.scenario == sc.ID {
				out = append(out, m)
			}
		}
		bad := false
		for _, res := range r.Results[sc.ID] {
			bad = bad || res.Errors > 0 || res.Stuck
		}
		if bad {
			out = append(out, metric{scenario: sc.ID, label: "errors", noRatio: true,
				value:  func(res *Result, _ Scenario) float64 { return float64(res.Errors) },
				format: fmtInt})
		}
	}
	return out
}

func cell(m metric, sc Scenario, res, base *Result) string {
	if res == nil {
		return "—"
	}
	v := m.value(res, sc)
	if math.IsNaN(v) {
		return "n/a"
	}
	s := m.format(v)
	if res.Stuck {
		s += " (stuck)"
	}
	if m.noRatio || base == nil || base == res {
		return s
	}
	b := m.value(base, sc)
	if b == 0 || math.IsNaN(b) || math.IsInf(v, 0) || math.IsInf(b, 0) {
		return s
	}
	return fmt.Sprintf("%s (%s×)", s, ratioString(v/b))
}

func ratioString(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	case x >= 0.1 || x == 0:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.2g", x) // 0.0053, not 0.01: the bar is invisible, the label is not
	}
}
