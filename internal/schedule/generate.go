package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Size is how much one generated run does.
type Size struct {
	Holds   int           // acquisitions per process (at least)
	Horizon time.Duration // faults are drawn in [0, Horizon)
}

// Default is the size of every run, pinned CI seeds and fresh ones alike,
// so that a seed replays the same plan wherever it was found.
var Default = Size{Holds: 12, Horizon: 6 * time.Second}

// The generator is biased toward the places where faults have broken locks before:
// leases short enough to run out during a hand-over mixed with the watchdog's
// long one, holds that outlast their lease, a subscriber connection slower
// than a short lease (a grant that arrives late), and cuts placed a few
// EVALSHAs ahead (so they land on a rollback or a release as often as on an
// acquire).
var (
	leases = []time.Duration{0, 0, 0, 150 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, time.Second}
	holds  = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}
	thinks = []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond}
	delays = []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 400 * time.Millisecond}
	spans  = []time.Duration{500 * time.Millisecond, 2 * time.Second, 8 * time.Second}
)

// MaxPause bounds a process pause: a paused waiter cannot react, and the
// oversleep bound (Check) must stay well above it.
const MaxPause = 700 * time.Millisecond

// Generate draws the plan of one run of kind from seed.
func Generate(seed int64, kind string, size Size) *Plan {
	p := generate(seed, kind, size)
	drawClients(seed, p)
	drawNests(seed, p)
	return p
}

// drawNests gives a third of the holds of every process that re-enters
// (Lock, FairLock, RWLock's writers and readers, MultiLock and its
// contender) a nested hold with a lease of its own, and half of a writer's
// nested holds are reads (a downgrade): one hold then carries two leases,
// often the watchdog's beside a short one, which the waiters behind it must
// not oversleep (docs/internals.md, "No sleep outlasts the holder's
// remaining lease"). A Semaphore's and a latch's processes take none: a
// Semaphore hold is not reentrant, and a latch is no hold. Drawn from a
// random stream of its own, as drawClients, so that a seed's holds and
// faults are what they were before.
func drawNests(seed int64, p *Plan) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x4e57))
	for i := range p.Procs {
		pr := &p.Procs[i]
		if !nests(pr.Role) {
			continue
		}
		for j := range pr.Holds {
			if r.IntN(3) != 0 {
				continue
			}
			n := &Nest{Lease: pick(r, leases)}
			if pr.Role == RoleWrite && r.IntN(2) == 0 {
				n.Read, n.For = true, pick(r, holds)
			}
			pr.Holds[j].Nest = n
		}
	}
	aimAtLongerReentry(r, p)
}

// nests reports whether a process of role takes nested holds.
func nests(role string) bool {
	switch role {
	case RoleLock, RoleFair, RoleWrite, RoleRead, RoleMulti, RolePart:
		return true
	}
	return false
}

// aimAtLongerReentry sets up, in half the plans of the kinds that take
// nests, the window where a re-entry's longer lease outlasts the granted one: a holder H whose holds take a
// short lease and re-enter on the watchdog's (the hold's lease in Redis is
// then 30 s, and waiters are told so), and a waiter W whose lease is longer
// than H's own but far below 30 s, and whose holds outlast it: H's release
// hands the lock to W, W's lease runs out inside its hold with nothing
// published, and the waiters behind must not sleep on H's 30 s.
func aimAtLongerReentry(r *rand.Rand, p *Plan) {
	var fit []int
	for i, pr := range p.Procs {
		if nests(pr.Role) && pr.Role != RoleRead && pr.Role != RolePart {
			fit = append(fit, i)
		}
	}
	if len(fit) < 2 || r.IntN(2) == 0 {
		return
	}
	hi := r.IntN(len(fit))
	h, w := fit[hi], fit[(hi+1+r.IntN(len(fit)-1))%len(fit)]
	leaseH := pick(r, []time.Duration{150 * time.Millisecond, 200 * time.Millisecond})
	for j := range p.Procs[h].Holds {
		p.Procs[h].Holds[j].Lease, p.Procs[h].Holds[j].Nest = leaseH, &Nest{}
	}
	for j := range p.Procs[w].Holds {
		hd := &p.Procs[w].Holds[j]
		hd.Lease, hd.Nest = 2*leaseH, nil
		hd.Hold = max(hd.Hold, 3*leaseH)
	}
}

// drawClients gives each process of p a go-redis client setup, from a
// random stream of its own, so that a seed's holds and faults do not depend
// on the setups drawn.
func drawClients(seed int64, p *Plan) {
	r := rand.New(rand.NewPCG(uint64(seed), 0xc11e))
	for i := range p.Procs {
		p.Procs[i].Client = pick(r, []string{ClientDefault, ClientContextTimeout, ClientShortTimeouts})
	}
}

func generate(seed int64, kind string, size Size) *Plan {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	p := &Plan{Seed: seed, Kind: kind}
	switch kind {
	case KindSema:
		genSema(r, p, size)
		drawTestFaults(r, p, size)
		return p
	case KindLatch:
		genLatch(r, p, size)
		drawTestFaults(r, p, size)
		return p
	case KindDeadlock:
		genDeadlock(r, p, size)
		return p
	case KindReshard:
		genReshard(r, p, size)
		return p
	}
	for i, role := range roles(kind, r) {
		p.Procs = append(p.Procs, genProc(r, fmt.Sprintf("p%d", i+1), role, kind, size))
	}
	drawTestFaults(r, p, size)
	if kind == KindMulti {
		aimAtRollback(r, p, size)
	}
	if kind == KindLock {
		aimAtStaleGrant(r, p)
	}
	return p
}

// drawTestFaults draws the test's own faults: a process paused, a snapshot
// restored.
func drawTestFaults(r *rand.Rand, p *Plan, size Size) {
	if r.IntN(2) == 0 {
		victim := p.Procs[r.IntN(len(p.Procs))].ID
		p.Faults = append(p.Faults, Fault{At: at(r, size), Op: FaultPause, Proc: victim,
			For: time.Duration(100+r.IntN(int(MaxPause/time.Millisecond)-100)) * time.Millisecond})
	}
	if r.IntN(4) == 0 {
		p.Faults = append(p.Faults, Fault{At: at(r, size), Op: FaultRestore, Server: r.IntN(p.Servers()),
			For: time.Duration(300+r.IntN(700)) * time.Millisecond})
	}
}

// aimAtRollback gives a MultiLock process a cut that lands on its rollback
// for sure: the link to server 0 (its first group, A) cut just before the
// release that follows a busy answer from server 1 (B). Drawn last, so that
// the plans drawn before it was added replay unchanged but for it.
func aimAtRollback(r *rand.Rand, p *Plan, size Size) {
	if r.IntN(3) == 0 {
		return
	}
	var multis []int
	for i, pr := range p.Procs {
		if pr.Role == RoleMulti {
			multis = append(multis, i)
		}
	}
	pr := &p.Procs[pick(r, multis)]
	// Early in the run, so that many TryLocks remain to aim at.
	pr.Conn = append(pr.Conn, ConnFault{At: at(r, size) / 4, Server: 0, Conn: "command", Op: OpCutAfterBusy})
}

// aimAtStaleGrant sets up the window of a stale grant:
// a waiter W with a short lease is handed the lock by H, but only W's
// subscriber is slow, by more than W's lease. The grant's hold runs out, the
// rest of the queue (woken by the hand-over to a shorter lease) takes the
// lock, W's own timer — set for the end of H's lease — finds it held and
// queues W again, and the late grant arrives within a third of W's lease of
// that attempt: the one moment a grant check that looks only at the time of
// the last attempt takes it. So W gets every one of its leases short and its
// subscriber slowed for the whole run by a delay just above them, and H
// holds on a fixed lease for as long as makes the rest of its lease end
// (W's timer) fall a sixth of W's lease before the grant arrives. Drawn
// last, as aimAtRollback, and for Lock only, so that the plans of the other
// kinds do not change.
func aimAtStaleGrant(r *rand.Rand, p *Plan) {
	if r.IntN(3) == 0 {
		return
	}
	w := r.IntN(len(p.Procs))
	h := (w + 1 + r.IntN(len(p.Procs)-1)) % len(p.Procs)
	leaseW := pick(r, []time.Duration{240 * time.Millisecond, 300 * time.Millisecond, 360 * time.Millisecond})
	delay := 2*leaseW + pick(r, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond})
	const leaseH = time.Second
	// H's lease ends (W's timer fires) leaseW/6 before the grant, which
	// left at H's release; H's hold is shorter than the time it is inside
	// by a few milliseconds of reporting and the release's round trip.
	const overhead = 10 * time.Millisecond
	holdH := leaseH - (delay - leaseW/6) - overhead
	victim := &p.Procs[w]
	victim.Conn = slices.DeleteFunc(victim.Conn, func(f ConnFault) bool {
		return f.Conn == "subscriber" // a cut or an end of delay would spoil the one aimed at
	})
	victim.Conn = append(victim.Conn, ConnFault{At: 0, Server: 0, Conn: "subscriber", Op: OpDelay,
		Delay: delay, For: 10 * time.Minute})
	for i := range victim.Holds {
		victim.Holds[i].Lease = leaseW
	}
	for i := range p.Procs[h].Holds {
		p.Procs[h].Holds[i].Lease, p.Procs[h].Holds[i].Hold = leaseH, holdH
	}
}

// roles are the processes of a kind: four contenders, so that a hand-over
// always has a queue behind it.
func roles(kind string, r *rand.Rand) []string {
	switch kind {
	case KindFair:
		return []string{RoleFair, RoleFair, RoleFair, RoleFair}
	case KindRW:
		if r.IntN(2) == 0 {
			return []string{RoleWrite, RoleWrite, RoleWrite, RoleRead}
		}
		return []string{RoleWrite, RoleWrite, RoleRead, RoleRead}
	case KindMulti:
		return []string{RoleMulti, RoleMulti, RolePart, RolePart}
	}
	return []string{RoleLock, RoleLock, RoleLock, RoleLock}
}

func genProc(r *rand.Rand, id, role, kind string, size Size) Proc {
	pr := Proc{ID: id, Role: role}
	for range size.Holds {
		pr.Holds = append(pr.Holds, Hold{Lease: pick(r, leases), Hold: pick(r, holds), Think: pick(r, thinks)})
	}
	servers := 1
	if kind == KindMulti {
		servers = 2
	}
	for range r.IntN(3) {
		pr.Conn = append(pr.Conn, genConnFault(r, size, servers, role))
	}
	if role == RoleMulti && r.IntN(2) == 0 {
		// The MultiLock's first group is taken and the second is busy: a
		// cut placed one to three requests ahead on the first group's
		// server lands on the rollback as often as on an acquire.
		pr.Conn = append(pr.Conn, ConnFault{At: at(r, size), Server: 0, Conn: "command", Op: OpCutBefore,
			Skip: pick(r, []int{1, 1, 2, 3})})
	}
	if r.IntN(10) == 0 {
		pr.CloseAt = at(r, size) + size.Horizon/3
	}
	if r.IntN(7) == 0 {
		pr.ForceAt = at(r, size)
	}
	return pr
}

func genConnFault(r *rand.Rand, size Size, servers int, role string) ConnFault {
	f := ConnFault{At: at(r, size), Server: r.IntN(servers), Conn: "subscriber"}
	if role != RoleMulti && role != RolePart {
		f.Server = 0
	}
	switch n := r.IntN(9); {
	case n < 3: // a slow subscriber: grants and wake-ups arrive late
		f.Op, f.Delay, f.For = OpDelay, pick(r, delays), pick(r, spans)
	case n < 5: // slow replies
		f.Op, f.Conn, f.Delay, f.For = OpDelay, "command", pick(r, delays), pick(r, spans)
	case n < 7: // a link cut a few requests ahead: an acquire, a rollback, a release
		f.Op, f.Conn, f.Skip = OpCutBefore, "command", r.IntN(4)
	case n < 8:
		f.Op = OpCut
	default:
		f.Op, f.Conn = OpCut, "command"
	}
	return f
}

func at(r *rand.Rand, size Size) time.Duration {
	return time.Duration(r.Int64N(int64(size.Horizon)))
}

func pick[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }
