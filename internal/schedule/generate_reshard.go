package schedule

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// reshardSpans are how long a reshard leaves the slot split between its
// two masters (FaultReshard's For): the window of ASK and TRYAGAIN.
var reshardSpans = []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond}

// reshardSlack is how long a reshard may take besides its For: the
// MIGRATEs, every master's SETSLOT, and a reshard drawn before it that has
// not finished (the test moves one slot at a time). Drawn reshards start at
// least this far apart.
const reshardSlack = time.Second

// genReshard draws a reshard plan: the processes of a Lock's, FairLock's
// or RWLock's plan on a three-master Cluster, without connection faults
// (the faults of this kind are the Cluster's own), while the slot of A
// moves to another master two to four times; a process may be paused, as
// in the other kinds. The checks are the lock kinds'.
func genReshard(r *rand.Rand, p *Plan, size Size) {
	p.Cluster = true
	base := pick(r, []string{KindLock, KindFair, KindRW})
	for i, role := range roles(base, r) {
		pr := genProc(r, fmt.Sprintf("p%d", i+1), role, base, size)
		pr.Conn = nil
		p.Procs = append(p.Procs, pr)
	}
	next := time.Duration(0)
	for range 2 + r.IntN(3) {
		f := Fault{At: max(at(r, size)/2, next), Op: FaultReshard, For: pick(r, reshardSpans)}
		next = f.At + f.For + reshardSlack
		p.Faults = append(p.Faults, f)
	}
	if r.IntN(2) == 0 {
		victim := p.Procs[r.IntN(len(p.Procs))].ID
		p.Faults = append(p.Faults, Fault{At: at(r, size), Op: FaultPause, Proc: victim,
			For: time.Duration(100+r.IntN(int(MaxPause/time.Millisecond)-100)) * time.Millisecond})
	}
}
