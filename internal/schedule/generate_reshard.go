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

// genReshard draws a reshard plan: the processes of a Lock's, FairLock's,
// RWLock's or Semaphore's plan (its Base, whose checks judge it) on a
// three-master Cluster, without connection faults (the faults of this kind
// are the Cluster's own), while the slot of A (every key of the name) moves
// to another master two to four times; a process may be paused, as in the
// other kinds.
func genReshard(r *rand.Rand, p *Plan, size Size) {
	p.Cluster = true
	// A third of the plans are a Semaphore's, drawn from a stream of their
	// own, so that the lock kinds' plans are what they were before.
	if rand.New(rand.NewPCG(uint64(p.Seed), 0x5e4c)).IntN(3) == 0 {
		p.Base = KindSema
		genSema(r, p, size)
	} else {
		p.Base = pick(r, []string{KindLock, KindFair, KindRW})
		for i, role := range roles(p.Base, r) {
			p.Procs = append(p.Procs, genProc(r, fmt.Sprintf("p%d", i+1), role, p.Base, size))
		}
	}
	for i := range p.Procs {
		p.Procs[i].Conn = nil
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
