package schedule

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// The resources of a deadlock plan, all on server 0: Locks A and D, and a
// Semaphore S of DeadlockPermits permits, each hold taking one. With two
// permits, a process waiting for S is deadlocked only when both holders of
// S wait for what it holds (the AND/OR wait of deadlock_search.go).
const (
	ResD            = "D"
	ResS            = "S"
	DeadlockPermits = 2
)

// DeadlockWait bounds a deadlock plan's wait for its second resource: a
// wait that reaches it is a deadlock detection did not break. Detection
// breaks one within its delay and a half (1.5 s at the default), or some
// seconds later when a fault makes its checks fail (each failure doubles
// the next delay, up to 8 s); a deadlock it misses lasts for ever, the holds
// being the watchdog's.
const DeadlockWait = 20 * time.Second

// DeadlockRun bounds a deadlock plan's run: every process must have taken
// all its holds by then, since a deadlock left unbroken keeps its members
// from finishing (their waits end at DeadlockWait, and they take the hold
// again).
const DeadlockRun = 90 * time.Second

// deadlockHolds is how many pair holds each process of a deadlock plan
// takes: each deadlock costs its victim a retry a second or more later.
const deadlockHolds = 8

// PairGap is how long a deadlock plan's process keeps its first resource
// before it asks for the second: long enough for the others to take their
// own firsts, so that cycles form.
const PairGap = 150 * time.Millisecond

// genDeadlock draws a deadlock plan: four processes, each taking two of A,
// D and S in a drawn order, holding the first while it waits for the
// second, on the watchdog's lease (a short lease would end a cycle by
// itself), so that cycles through the Locks and through both holders of S
// form often; faults on their connections and a process paused. No
// snapshot is restored: a restore takes the holds away, which ends the
// deadlocks rather than testing their breaking.
func genDeadlock(r *rand.Rand, p *Plan, size Size) {
	res := []string{ResA, ResD, ResS}
	for i := range 4 {
		pr := Proc{ID: fmt.Sprintf("p%d", i+1), Role: RoleDeadlock}
		for range deadlockHolds {
			order := r.Perm(len(res))
			pr.Holds = append(pr.Holds, Hold{Hold: pick(r, holds), Think: pick(r, thinks),
				Pair: []string{res[order[0]], res[order[1]]}})
		}
		for range r.IntN(3) {
			pr.Conn = append(pr.Conn, genConnFault(r, size, 1, pr.Role))
		}
		p.Procs = append(p.Procs, pr)
	}
	if r.IntN(2) == 0 {
		victim := p.Procs[r.IntN(len(p.Procs))].ID
		p.Faults = append(p.Faults, Fault{At: at(r, size), Op: FaultPause, Proc: victim,
			For: time.Duration(100+r.IntN(int(MaxPause/time.Millisecond)-100)) * time.Millisecond})
	}
}

// Exclusive returns the resources of a deadlock hold's pair that one
// holder at a time may hold (S has two permits).
func Exclusive(pair []string) []string {
	var out []string
	for _, r := range pair {
		if r != ResS {
			out = append(out, r)
		}
	}
	return out
}
