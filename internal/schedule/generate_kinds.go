package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// MaxTake is the most permits one Semaphore hold asks for; Check counts a
// Semaphore with at least MaxTake permits free (or none used) as free for
// every waiter.
const MaxTake = 3

// capacities are the Semaphore's capacities, at the start and as set: 2 is
// below the largest request, so a SetPermits can leave a waiter asking for
// more than there will ever be.
var capacities = []int{2, 3, 4, 5}

// genSema draws a Semaphore plan: four processes holding 1 to MaxTake
// permits at a time with the generator's leases, holds and pauses; one to
// three SetPermits at random points from random processes; in a third of the
// plans, a fifth process whose crowd of 100+ waiters (over several Clients)
// each takes one permit once, so that the queue is long while the others
// contend.
func genSema(r *rand.Rand, p *Plan, size Size) {
	p.Permits = pick(r, capacities[1:])
	for i := range 4 {
		pr := Proc{ID: fmt.Sprintf("p%d", i+1), Role: RoleSema}
		for range size.Holds {
			pr.Holds = append(pr.Holds, Hold{Lease: pick(r, leases), Hold: pick(r, holds), Think: pick(r, thinks),
				Permits: 1 + r.IntN(MaxTake)})
		}
		p.Procs = append(p.Procs, pr)
	}
	if r.IntN(3) == 0 {
		crowd := Proc{ID: "p5", Role: RoleCrowd, Crowd: 100 + r.IntN(40), CrowdClients: 2 + r.IntN(3),
			Holds: []Hold{{Lease: pick(r, leases), Hold: 20 * time.Millisecond, Permits: 1}}}
		p.Procs = append(p.Procs, crowd)
	}
	for range 1 + r.IntN(3) {
		pr := &p.Procs[r.IntN(4)]
		pr.SetPermits = append(pr.SetPermits, PermitChange{At: at(r, size), N: pick(r, capacities)})
	}
	for i := range p.Procs {
		pr := &p.Procs[i]
		for range r.IntN(3) {
			pr.Conn = append(pr.Conn, genConnFault(r, size, 1, pr.Role))
		}
		if pr.Role == RoleSema && r.IntN(10) == 0 {
			pr.CloseAt = at(r, size) + size.Horizon/3
		}
		outlastSlowReplies(pr)
	}
}

// outlastSlowReplies gives the watchdog's lease to every hold of pr whose
// fixed lease a slow reply of pr's could outlast: a grant whose reply comes
// after its lease is no hold, so such a waiter is refused until the replies
// are fast again, by design, while its expired grants keep permits used in
// Redis — which the rules on sleeping while permits are free and on permits
// held by nobody could not tell from a stranded waiter and a leak.
func outlastSlowReplies(pr *Proc) {
	var slowest time.Duration
	for _, f := range pr.Conn {
		if f.Op == OpDelay && f.Conn == "command" {
			slowest = max(slowest, f.Delay)
		}
	}
	for i := range pr.Holds {
		if h := &pr.Holds[i]; slowest > 0 && h.Lease > 0 && h.Lease < 2*slowest+100*time.Millisecond {
			h.Lease = 0
		}
	}
}

// Latch rounds: each round's latch is set by one process, counted down
// Count times by the processes, and waited for by one to three of them; its
// setter deletes it RoundLife after setting it if it is still closed (the
// CountDowns a restored snapshot forgot never come again).
const RoundLife = 3 * time.Second

// genLatch draws a CountDownLatch plan: four processes and three or four
// rounds spread over the horizon, each with a count of 1 to 5 whose
// CountDowns come from random processes 100 ms to 1.5 s after the set, and
// its waiters starting 0 to 600 ms after the set.
func genLatch(r *rand.Rand, p *Plan, size Size) {
	for i := range 4 {
		p.Procs = append(p.Procs, Proc{ID: fmt.Sprintf("p%d", i+1), Role: RoleLatch})
	}
	n := 3 + r.IntN(2)
	for i := range n {
		rd := Round{At: time.Duration(i)*size.Horizon/time.Duration(n) + time.Duration(r.Int64N(int64(300*time.Millisecond))),
			Count: 1 + r.IntN(5), SetBy: p.Procs[r.IntN(4)].ID}
		p.Rounds = append(p.Rounds, rd)
		p.Proc(rd.SetBy).Latch = append(p.Proc(rd.SetBy).Latch, LatchOp{At: rd.At, Op: LatchSet, Round: i})
		for range rd.Count {
			pr := &p.Procs[r.IntN(4)]
			pr.Latch = append(pr.Latch, LatchOp{At: rd.At + 100*time.Millisecond + time.Duration(r.Int64N(int64(1400*time.Millisecond))),
				Op: LatchCount, Round: i})
		}
		for _, w := range r.Perm(4)[:1+r.IntN(3)] {
			pr := &p.Procs[w]
			pr.Latch = append(pr.Latch, LatchOp{At: rd.At + time.Duration(r.Int64N(int64(600*time.Millisecond))), Op: LatchWait, Round: i})
		}
	}
	for i := range p.Procs {
		pr := &p.Procs[i]
		slices.SortStableFunc(pr.Latch, func(a, b LatchOp) int { return int(a.At - b.At) })
		for range r.IntN(3) {
			pr.Conn = append(pr.Conn, genConnFault(r, size, 1, pr.Role))
		}
	}
}
