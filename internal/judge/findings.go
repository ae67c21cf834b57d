package judge

import (
	"fmt"
	"strings"
)

// Findings is what a verdict found wrong: a line per problem, and how many
// times each rule broke. This package's Verdict and internal/schedule's
// embed it.
type Findings struct {
	Problems []string
	broken   map[string]int // rule -> problems
}

// Record adds the problem line, counting it against rule (several rules
// joined by "+" each count once).
func (f *Findings) Record(rule, line string) {
	if f.broken == nil {
		f.broken = make(map[string]int)
	}
	for _, r := range strings.Split(rule, "+") {
		f.broken[r]++
	}
	f.Problems = append(f.Problems, line)
}

// Failed reports whether the run broke a rule.
func (f *Findings) Failed() bool { return len(f.Problems) > 0 }

// Count lists the rules broken, with how many times, in the order given.
func (f *Findings) Count(order []string) string {
	var parts []string
	for _, r := range order {
		if n := f.broken[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", r, n))
		}
	}
	return strings.Join(parts, ", ")
}
