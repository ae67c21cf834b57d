// Package schedule is the randomized fault-schedule tester's plan: which
// processes contend for which lock, with which leases, and which faults hit
// which connection of which process when. A Plan is drawn from a seed
// (Generate), so a failing run is replayed from its seed alone; it travels to
// each process (internal/holderproc -plan) as JSON. Check judges what the
// processes reported against what the test saw in Redis.
package schedule

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Lock kinds a plan can exercise.
const (
	KindLock  = "lock"  // relock Lock
	KindFair  = "fair"  // FairLock
	KindRW    = "rw"    // RWLock: writers and readers
	KindMulti = "multi" // MultiLock over two redis-servers, with plain Locks on one part
	KindSema  = "sema"  // Semaphore: holds of 1-3 permits, SetPermits, a crowd of waiters
	KindLatch = "latch" // CountDownLatch: rounds of TrySetCount, CountDowns and Waits
	// KindDeadlock: processes take two of Locks A and D and a Semaphore S,
	// in orders that deadlock; detection breaks them (generate_deadlock.go).
	KindDeadlock = "deadlock"
	// KindReshard: a Lock's, FairLock's, RWLock's or Semaphore's processes
	// (Plan.Base) on a three-master Redis Cluster whose slot of A moves
	// between masters (generate_reshard.go).
	KindReshard = "reshard"
)

// Kinds lists every kind, in the order the short run takes them.
var Kinds = []string{KindLock, KindFair, KindRW, KindMulti, KindSema, KindLatch, KindDeadlock, KindReshard}

// Roles: what one process takes.
const (
	RoleLock  = "lock"  // Lock on resource A
	RoleFair  = "fair"  // FairLock on A
	RoleWrite = "write" // RWLock(A).WriteLock
	RoleRead  = "read"  // RWLock(A).ReadLock
	RoleMulti = "multi" // MultiLock(A on server 0, B on server 1)
	RolePart  = "part"  // Lock on B (server 1): the MultiLock's contender
	RoleSema  = "sema"  // Semaphore A: one hold of Hold.Permits at a time
	// RoleCrowd is Crowd goroutines over CrowdClients Clients, each taking
	// one permit of Semaphore A once: a queue of many waiters.
	RoleCrowd = "crowd"
	RoleLatch = "latch" // CountDownLatch rounds: its TrySetCount, CountDowns and Waits
	// RoleDeadlock takes each hold's Pair: the first, then the second
	// while it keeps the first.
	RoleDeadlock = "deadlock"
)

// Resource names. A lives on server 0, B on server 1.
const (
	ResA = "A"
	ResB = "B"
)

// Plan is one run.
type Plan struct {
	Seed   int64
	Kind   string
	Procs  []Proc
	Faults []Fault // the test's own: pause a process, restore a snapshot
	// Permits is the Semaphore's capacity at the start (KindSema).
	Permits int `json:",omitempty"`
	// Rounds are the latches of KindLatch, one name each (LatchName).
	Rounds []Round `json:",omitempty"`
	// Cluster runs the plan on a three-master Redis Cluster (KindReshard):
	// each process has one Client, of a ClusterClient over its nodes.
	Cluster bool `json:",omitempty"`
	// Base is the kind whose processes and checks a reshard plan takes
	// (lock, fair, rw or sema); empty for the other kinds.
	Base string `json:",omitempty"`
}

// BaseKind is the kind whose processes the plan runs and whose rules judge
// it: Base, or else Kind.
func (p *Plan) BaseKind() string {
	if p.Base != "" {
		return p.Base
	}
	return p.Kind
}

// Round is one latch: set to Count at At by the process SetBy.
type Round struct {
	At    time.Duration
	Count int
	SetBy string
}

// LatchName is the name of round i's latch.
func LatchName(i int) string { return fmt.Sprintf("L%d", i) }

// Proc is one OS process with its own relock Client (one per server).
type Proc struct {
	ID    string
	Role  string
	Holds []Hold
	Conn  []ConnFault
	// CloseAt closes the process's Client at that time (0: never); the
	// process ends its run there.
	CloseAt time.Duration
	// ForceAt makes the process ForceUnlock its lock from its own Client,
	// beside its own wait or hold (0: never).
	ForceAt time.Duration
	// SetPermits are the Semaphore capacity changes this process makes,
	// beside its holds (KindSema).
	SetPermits []PermitChange `json:",omitempty"`
	// Crowd and CrowdClients shape a RoleCrowd process.
	Crowd, CrowdClients int `json:",omitempty"`
	// Latch is what a RoleLatch process does, in time order.
	Latch []LatchOp `json:",omitempty"`
	// Client is how the process's go-redis clients are made: ClientDefault,
	// ClientContextTimeout or ClientShortTimeouts. Each makes relock bound
	// its calls another way (an Unlock detached, or inline under go-redis's
	// own bound).
	Client string `json:",omitempty"`
}

// go-redis client setups (Proc.Client).
const (
	ClientDefault        = ""           // go-redis's defaults: 3 s timeouts
	ClientContextTimeout = "ctxtimeout" // ContextTimeoutEnabled
	ClientShortTimeouts  = "timeouts"   // 200 ms read and write timeouts, no ContextTimeoutEnabled
)

// ShortTimeout is ClientShortTimeouts' read and write timeout: together
// within half of relock's default unlock timeout, so that Unlock runs
// inline. A plan's reply delay holds a read once it has data, which the
// read deadline does not cut; a reply read in two parts can time out.
const ShortTimeout = 200 * time.Millisecond

// Hold is one acquisition: TryLock with Lease (0: the watchdog's), stay
// inside for Hold, Unlock, then pause Think before the next. Permits is the
// number of permits of a Semaphore hold. Nest, when set, is a second hold
// taken inside this one (see Nest). Pair is the resources a RoleDeadlock
// hold takes, in order.
type Hold struct {
	Lease, Hold, Think time.Duration
	Permits            int      `json:",omitempty"`
	Nest               *Nest    `json:",omitempty"`
	Pair               []string `json:",omitempty"`
}

// Nest is a hold taken on the context of another, at once after entering
// it, with a lease of its own (0: the watchdog's), so that one hold carries
// two leases: a re-entry of the same lock, ended before the outer hold; or,
// for a writer (Read), a read hold (a downgrade), which outlives the write
// hold by For: the write side is unlocked first, the read side For later.
// The read part is not reported as a hold (the process's role is a
// writer's); the lock stays held in Redis meanwhile.
type Nest struct {
	Lease time.Duration
	Read  bool          `json:",omitempty"`
	For   time.Duration `json:",omitempty"`
}

func (n *Nest) String() string {
	if n.Read {
		return fmt.Sprintf("+read %v/%v", n.Lease, n.For)
	}
	return fmt.Sprintf("+re-entry %v", n.Lease)
}

// PermitChange is SetPermits(N) at At.
type PermitChange struct {
	At time.Duration
	N  int
}

// Latch operations.
const (
	LatchSet   = "set"   // TrySetCount(Round's Count), then Wait, then Delete if still closed
	LatchCount = "count" // CountDown
	LatchWait  = "wait"  // Wait
)

// LatchOp is one latch call of round Round at At.
type LatchOp struct {
	At    time.Duration
	Op    string
	Round int
}

// Connection fault operations.
const (
	OpDelay     = "delay"      // delay every read of the connection kind for For
	OpCut       = "cut"        // close every connection of the kind now
	OpCutBefore = "cut-before" // cut the link just before the Skip+1-th EVALSHA from now
	// OpCutAfterBusy cuts the command link to Server just before its next
	// EVALSHA once the process's next EVALSHA to the other server has
	// answered busy: a MultiLock's rollback of the group it took first.
	OpCutAfterBusy = "cut-after-busy"
)

// ConnFault is one fault on one connection kind of one process's client of
// one server.
type ConnFault struct {
	At     time.Duration
	Server int
	Conn   string // "command" or "subscriber"
	Op     string
	Delay  time.Duration // OpDelay: per read
	For    time.Duration // OpDelay: how long the delay lasts
	Skip   int           // OpCutBefore: EVALSHAs let through first
}

// Test-side faults.
const (
	FaultPause   = "pause"   // SIGSTOP Proc for For, then SIGCONT
	FaultRestore = "restore" // SAVE Server, For of traffic, restart loading it, ForceUnlock the stale holds
	// FaultReshard moves the Cluster slot of A to another master: MIGRATING
	// and IMPORTING, its keys moved, For with the slot split between the
	// two (ASK, TRYAGAIN), then SETSLOT NODE (MOVED for the clients that
	// still ask the old master).
	FaultReshard = "reshard"
)

// Fault is one fault the test injects itself.
type Fault struct {
	At     time.Duration
	Op     string
	Proc   string
	Server int
	For    time.Duration
}

// Resources returns the resources a role takes.
func Resources(role string) []string {
	switch role {
	case RoleMulti:
		return []string{ResA, ResB}
	case RolePart:
		return []string{ResB}
	case RoleLatch:
		return nil
	}
	return []string{ResA}
}

// Servers is how many redis-servers of their own the plan needs (none for
// a Cluster plan: it runs on a Cluster).
func (p *Plan) Servers() int {
	if p.Cluster {
		return 0
	}
	if p.Kind == KindMulti {
		return 2
	}
	return 1
}

// Encode is the plan as holderproc's -plan takes it.
func (p *Plan) Encode() string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a Plan has only encodable fields
	}
	return string(b)
}

// Decode parses what Encode produced.
func Decode(s string) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("schedule: bad plan: %w", err)
	}
	return &p, nil
}

// Proc returns the process with id, or nil; a crowd's waiter, "<id>.g<i>",
// is its process's.
func (p *Plan) Proc(id string) *Proc {
	id, _, _ = strings.Cut(id, ".")
	for i := range p.Procs {
		if p.Procs[i].ID == id {
			return &p.Procs[i]
		}
	}
	return nil
}

// Describe is a short human summary, for the failure message and the table.
func (p *Plan) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, kind %s:", p.Seed, p.Kind)
	if p.Cluster {
		fmt.Fprintf(&b, " %s on a three-master Cluster", p.Base)
	}
	for _, pr := range p.Procs {
		var leases []string
		for _, h := range pr.Holds {
			d := fmt.Sprintf("%v/%v", h.Lease, h.Hold)
			if h.Nest != nil {
				d += h.Nest.String()
			}
			leases = append(leases, d)
		}
		fmt.Fprintf(&b, "\n  %s %s", pr.ID, pr.Role)
		if pr.Client != ClientDefault {
			fmt.Fprintf(&b, " (go-redis: %s)", pr.Client)
		}
		if len(leases) > 0 {
			fmt.Fprintf(&b, " holds(lease/hold) %s", strings.Join(leases, " "))
		}
		describeExtra(&b, pr)
		for _, f := range pr.Conn {
			fmt.Fprintf(&b, "\n     at %v: %s", f.At, f)
		}
		if pr.CloseAt > 0 {
			fmt.Fprintf(&b, "\n     at %v: Close", pr.CloseAt)
		}
		if pr.ForceAt > 0 {
			fmt.Fprintf(&b, "\n     at %v: ForceUnlock", pr.ForceAt)
		}
	}
	for _, f := range p.Faults {
		target := f.Proc
		switch f.Op {
		case FaultRestore:
			target = fmt.Sprintf("server %d", f.Server)
		case FaultReshard:
			target = "the slot of " + ResA
		}
		fmt.Fprintf(&b, "\n  at %v: %s %s for %v", f.At, f.Op, target, f.For)
	}
	if p.Permits > 0 {
		fmt.Fprintf(&b, "\n  capacity %d at the start", p.Permits)
	}
	for i, r := range p.Rounds {
		fmt.Fprintf(&b, "\n  round %d: %s sets %s to %d at %v", i, r.SetBy, LatchName(i), r.Count, r.At)
	}
	return b.String()
}

func (f ConnFault) String() string {
	switch f.Op {
	case OpDelay:
		return fmt.Sprintf("delay %s reads of server %d by %v for %v", f.Conn, f.Server, f.Delay, f.For)
	case OpCutBefore:
		return fmt.Sprintf("cut %s link to server %d before EVALSHA #%d", f.Conn, f.Server, f.Skip+1)
	case OpCutAfterBusy:
		return fmt.Sprintf("cut %s link to server %d before its next EVALSHA once the other server answers busy", f.Conn, f.Server)
	}
	return fmt.Sprintf("cut %s links to server %d", f.Conn, f.Server)
}

// FaultCount is how many faults the plan injects, of every source.
func (p *Plan) FaultCount() int {
	n := len(p.Faults)
	for _, pr := range p.Procs {
		n += len(pr.Conn)
		if pr.CloseAt > 0 {
			n++
		}
		if pr.ForceAt > 0 {
			n++
		}
	}
	return n
}

func describeExtra(b *strings.Builder, pr Proc) {
	for _, h := range pr.Holds {
		if h.Permits > 0 {
			fmt.Fprintf(b, " [%d]", h.Permits)
		}
	}
	if pr.Role == RoleDeadlock {
		var pairs []string
		for _, h := range pr.Holds {
			pairs = append(pairs, strings.Join(h.Pair, ">"))
		}
		fmt.Fprintf(b, "\n     takes %s", strings.Join(pairs, " "))
	}
	if pr.Crowd > 0 {
		fmt.Fprintf(b, "\n     a crowd of %d waiters over %d Clients", pr.Crowd, pr.CrowdClients)
	}
	for _, c := range pr.SetPermits {
		fmt.Fprintf(b, "\n     at %v: SetPermits(%d)", c.At, c.N)
	}
	for _, op := range pr.Latch {
		fmt.Fprintf(b, "\n     at %v: %s %s", op.At, op.Op, LatchName(op.Round))
	}
}
