package schedule

import (
	"testing"
	"time"
)

// A reshard plan runs a Lock's, FairLock's, RWLock's or Semaphore's
// processes on a Cluster, without connection faults, with two to four
// moves of A's slot one after the other, and replays from its seed.
func TestGenerateReshard(t *testing.T) {
	bases := map[string]bool{}
	for seed := range int64(30) {
		p := Generate(seed, KindReshard, Default)
		if !p.Cluster || p.Servers() != 0 {
			t.Fatalf("%d: not a Cluster plan", seed)
		}
		bases[p.Base] = true
		for _, pr := range p.Procs {
			if len(pr.Conn) > 0 {
				t.Fatalf("%d: %s has connection faults", seed, pr.ID)
			}
		}
		moves, free := 0, time.Duration(0)
		for _, f := range p.Faults {
			if f.Op != FaultReshard {
				continue
			}
			moves++
			if f.At < free {
				t.Fatalf("%d: a move at %v, before the one before it is done (%v)", seed, f.At, free)
			}
			free = f.At + f.For + reshardSlack
		}
		if moves < 2 || moves > 4 {
			t.Fatalf("%d: %d moves", seed, moves)
		}
		if Generate(seed, KindReshard, Default).Describe() != p.Describe() {
			t.Fatalf("%d: two draws differ", seed)
		}
	}
	for _, kind := range []string{KindLock, KindFair, KindRW, KindSema} {
		if !bases[kind] {
			t.Errorf("no plan of %s processes in 30 seeds", kind)
		}
	}
}
