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
	// against names the library the row's ratio is taken against instead of
	// the floor; such a row shows the ratio alone.
	against string
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

func fmtRate(v float64) string    { return fmt.Sprintf("%.0f/s", v) }
func fmtCount(v float64) string   { return fmt.Sprintf("%.2f", v) }
func fmtInt(v float64) string     { return fmt.Sprintf("%.0f", v) }
func fmtPercent(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

func fmtFairness(v float64) string {
	if math.IsInf(v, 1) {
		return "∞ (one got none)"
	}
	return fmt.Sprintf("%.2f", v)
}

// The values rows are made of.
var (
	latencyOf = func(r *Result) []time.Duration { return r.Latency }
	waitOf    = func(r *Result) []time.Duration { return r.Wait }
	handoffOf = func(r *Result) []time.Duration { return r.Handoff }
	rateOf    = func(r *Result, _ Scenario) float64 { return r.Rate() }
	sentOf    = func(r *Result, _ Scenario) float64 { return r.SentPerOp() }
	serverOf  = func(r *Result, _ Scenario) float64 { return r.ServerPerOp() }
)

// pct is the p-th percentile of the durations f picks.
func pct(p float64, f func(*Result) []time.Duration) func(*Result, Scenario) float64 {
	return durationOf(func(r *Result) time.Duration { return Percentile(f(r), p) })
}

// rowsOf makes the rows of one scenario.
type rowsOf string

func (id rowsOf) m(label string, value func(*Result, Scenario) float64, format func(float64) string) metric {
	return metric{scenario: string(id), label: label, value: value, format: format}
}

// metricsFor returns the rows of scenario sc, clients being the Config's
// number of shared Clients.
func metricsFor(sc Scenario, clients int) []metric {
	m := rowsOf(sc.ID).m
	switch {
	case sc.Workers == 1:
		cycle := "Lock+Unlock"
		if sc.Depth > 1 {
			cycle = fmt.Sprintf("%d×Lock + %d×Unlock", sc.Depth, sc.Depth)
		}
		return []metric{
			m(cycle+" p50", pct(50, latencyOf), fmtDuration),
			m(cycle+" p99", pct(99, latencyOf), fmtDuration),
			m("cycles/s", rateOf, fmtRate),
			m("commands sent / cycle", sentOf, fmtCount),
			m("commands run by Redis / cycle", serverOf, fmtCount),
		}
	case sc.OwnKeys:
		return []metric{
			m("cycles/s", rateOf, fmtRate),
			m("Lock p99", pct(99, waitOf), fmtDuration),
			m("commands sent / cycle", sentOf, fmtCount),
			m("commands run by Redis / cycle", serverOf, fmtCount),
		}
	}
	return contendedMetrics(sc, clients)
}

// contendedMetrics are the rows of a scenario whose workers share keys.
func contendedMetrics(sc Scenario, clients int) []metric {
	m := rowsOf(sc.ID).m
	per := "goroutine"
	if sc.perProcess(clients) {
		per = "process"
	}
	out := []metric{m("acquisitions/s", rateOf, fmtRate)}
	if sc.Hold > 0 && !sc.ShortHold { // the rest of each cycle is the lock's
		out = append(out, m(fmt.Sprintf("share of the %.0f/s ideal", sc.IdealRate()), func(r *Result, sc Scenario) float64 {
			return r.Rate() / sc.IdealRate()
		}, fmtPercent))
	}
	out = append(out,
		m("hand-off p50", pct(50, handoffOf), fmtDuration),
		m("hand-off p99", pct(99, handoffOf), fmtDuration),
		m("Lock p99 (time in Lock)", pct(99, waitOf), fmtDuration),
	)
	share := func(label string, n func(*Result) int64) metric {
		t := m(label, func(r *Result, _ Scenario) float64 {
			if len(r.Handoff) == 0 {
				return math.NaN()
			}
			return float64(n(r)) / float64(len(r.Handoff))
		}, fmtPercent)
		t.noRatio = true
		return t
	}
	out = append(out, share("handed to a waiter", func(r *Result) int64 { return r.ToWaiter }))
	if !sc.PassOn {
		out = append(out, share("taken back by the releaser", func(r *Result) int64 { return r.Reacquired }))
	}
	v := m("mutual-exclusion violations", func(r *Result, _ Scenario) float64 { return float64(r.Violations) }, fmtInt)
	v.noRatio = true
	return append(out,
		m("max/min acquisitions per "+per, func(r *Result, _ Scenario) float64 { return r.Fairness() }, fmtFairness),
		m("commands sent / acquisition", sentOf, fmtCount),
		m("commands run by Redis / acquisition", serverOf, fmtCount),
		v,
	)
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

// WriteTable writes the results as markdown tables, the headline scenarios
// first, then the shared-Client ones: one column per library, each cell the
// value and, in parentheses, its ratio to the floor's (library ÷ floor; for
// the reentrant scenario, to the floor's uncontended cycle).
func (r *Report) WriteTable(w io.Writer) {
	var head, shared []Scenario
	for _, sc := range r.Config.Scenarios {
		if sc.Headline {
			head = append(head, sc)
		} else {
			shared = append(shared, sc)
		}
	}
	if len(head) > 0 && len(shared) > 0 {
		fmt.Fprintf(w, "#### One Client per process\n\n")
	}
	r.writeTable(w, head)
	if len(head) > 0 && len(shared) > 0 {
		fmt.Fprintf(w, "\n#### Goroutines sharing %d Client(s)\n\n", r.Config.Clients)
	}
	r.writeTable(w, shared)
}

func (r *Report) writeTable(w io.Writer, scs []Scenario) {
	rows := r.rows(scs)
	if len(rows) == 0 {
		return
	}
	libs := r.Config.Libraries
	fmt.Fprintf(w, "| scenario | metric |")
	for _, l := range libs {
		fmt.Fprintf(w, " %s |", l.Name)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(libs)))
	for _, m := range rows {
		sc, _ := r.scenario(m.scenario)
		base := r.baselineOf(sc)
		fmt.Fprintf(w, "| %s | %s |", sc.Title, m.label)
		for _, l := range libs {
			res := r.Result(m.scenario, l.Name)
			if m.against != "" {
				fmt.Fprintf(w, " %s |", ratioCell(m, sc, res, r.Result(m.scenario, m.against)))
				continue
			}
			fmt.Fprintf(w, " %s |", cell(m, sc, res, base))
		}
		fmt.Fprintln(w)
	}
}

// rows is metricsFor the scenarios of scs that ran, plus an errors row for
// each scenario in which some library had errors or got stuck.
func (r *Report) rows(scs []Scenario) []metric {
	var out []metric
	for _, sc := range scs {
		if r.Results[sc.ID] == nil {
			continue
		}
		out = append(out, metricsFor(sc, r.Config.Clients)...)
		if (sc.Workers == 1 || sc.OwnKeys) && r.Result(sc.ID, SeedName) != nil {
			// The floor for a reentrant lock, where one caller's cycle is
			// what is measured.
			out = append(out, metric{scenario: sc.ID, label: "cycles/s ÷ the seed lock's", against: SeedName,
				value: func(res *Result, _ Scenario) float64 { return res.Rate() }})
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

// ratioCell is res's value ÷ base's, alone ("—" when either is missing).
func ratioCell(m metric, sc Scenario, res, base *Result) string {
	if res == nil || base == nil {
		return "—"
	}
	v, b := m.value(res, sc), m.value(base, sc)
	if b == 0 || math.IsNaN(v) || math.IsNaN(b) {
		return "n/a"
	}
	return ratioString(v/b) + "×"
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
