package judge

import (
	"fmt"
	"strings"
	"time"
)

// Row is one run in the table: a scenario and a lock kind.
type Row struct {
	Scenario, Kind string
	V              *Verdict
}

// Markdown renders rows as a markdown table.
func Markdown(rows []Row) string {
	var b strings.Builder
	b.WriteString("| scenario | kind | acquisitions | faults | overlaps ordered by tokens | unordered overlaps | overlaps, loser not told | losses signalled | lost found only at Unlock | max overlap | max hand-off after the fault | keys without TTL | verdict |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		v := r.V
		verdict := "pass"
		if v.Failed() {
			verdict = "**FAIL**: " + v.Broken()
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %s | %s | %d | %s |\n",
			r.Scenario, r.Kind, v.Acquisitions, len(v.Faults), v.Ordered, v.Unordered, v.Untold,
			v.Signalled, v.LostAtUnlock, ms(v.MaxOverlap), ms(v.MaxHandoff), len(v.Leftover), verdict)
	}
	return b.String()
}

func ms(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}
