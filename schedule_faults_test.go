package relock_test

import (
	"context"
	"slices"
	"syscall"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/schedule"
)

// sampleEvery is how often the sampler asks Redis who holds each resource.
const sampleEvery = 20 * time.Millisecond

// resourceServer is the server each resource lives on.
var resourceServer = map[string]int{schedule.ResA: 0, schedule.ResB: 1}

// deadlockResources are a deadlock plan's, all on server 0.
var deadlockResources = map[string]int{schedule.ResA: 0, schedule.ResD: 0, schedule.ResS: 0}

// resources are the resources of the run's plan, with their servers.
func (r *scheduleRun) resources() map[string]int {
	if r.plan.Kind == schedule.KindDeadlock {
		return deadlockResources
	}
	return resourceServer
}

// sample records, until ctx ends, which resources have a holder in Redis.
func (r *scheduleRun) sample(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		s := r.sampleOnce(ctx)
		r.mu.Lock()
		r.samples = append(r.samples, s)
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (r *scheduleRun) sampleOnce(ctx context.Context) schedule.Sample {
	s := schedule.Sample{At: time.Now(), Held: map[string]bool{}, Known: !r.restoring.Load()}
	switch r.plan.BaseKind() {
	case schedule.KindSema:
		r.sampleSema(ctx, &s)
	case schedule.KindLatch:
		r.sampleLatches(ctx, &s)
	default:
		r.sampleLocks(ctx, &s)
	}
	if r.restoring.Load() {
		s.Known = false
	}
	return s
}

func (r *scheduleRun) sampleLocks(ctx context.Context, s *schedule.Sample) {
	for res, srv := range r.resources() {
		if srv >= len(r.inspect) {
			continue
		}
		held, err := r.held(ctx, res)
		if err != nil {
			s.Known = false
		}
		s.Held[res] = held
	}
}

// sampleSema reads Semaphore A's state; a waiter may have to wait while
// permits are used and fewer than schedule.MaxTake are free.
func (r *scheduleRun) sampleSema(ctx context.Context, s *schedule.Sample) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := r.inspect[0].Semaphore(schedule.ResA, 1).State(ctx)
	if err != nil {
		s.Known = false
		return
	}
	s.Sema = schedule.SemaSample{Permits: st.Permits, Used: st.Used, Waiters: st.Waiters, Owners: map[string]bool{}}
	switch sema, err := r.inspect[0].Inspect(ctx, schedule.ResA); {
	case err != nil:
		s.Sema.Owners = nil // not known: the summed check judges
	case sema.Semaphore != nil:
		for _, h := range sema.Semaphore.Holders {
			s.Sema.Owners[h.Owner] = true
		}
	}
	if st.Used == 0 && st.Waiters == 0 {
		s.Sema.Permits = 0 // nothing in Redis, no capacity recorded: State reports this Semaphore's
	}
	s.Held[schedule.ResA] = st.Used > 0 && st.Permits-st.Used < schedule.MaxTake
}

// sampleLatches reads which rounds' latches are closed.
func (r *scheduleRun) sampleLatches(ctx context.Context, s *schedule.Sample) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for i := range r.plan.Rounds {
		name := schedule.LatchName(i)
		n, err := r.inspect[0].CountDownLatch(name).Count(ctx)
		if err != nil {
			s.Known = false
		}
		s.Held[name] = n > 0
	}
}

// held reports whether Redis lists a holder of res, of any kind (for a
// Semaphore: a hold or a waiter).
func (r *scheduleRun) held(ctx context.Context, res string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	switch r.plan.BaseKind() {
	case schedule.KindSema:
		st, err := r.inspect[0].Semaphore(res, 1).State(ctx)
		return st.Used > 0 || st.Waiters > 0, err
	case schedule.KindLatch:
		return false, nil // a latch left closed is a key without a TTL
	}
	st, err := r.inspect[r.resources()[res]].Inspect(ctx, res)
	if err != nil {
		return false, err
	}
	switch {
	case st.Lock != nil && len(st.Lock.Holders) > 0:
		return true, nil
	case st.FairLock != nil && len(st.FairLock.Holders) > 0:
		return true, nil
	case st.RWLock != nil && (len(st.RWLock.Readers) > 0 || st.RWLock.Writer != nil):
		return true, nil
	case st.Semaphore != nil && len(st.Semaphore.Holders) > 0: // a deadlock plan's S
		return true, nil
	}
	return false, nil
}

// inject plays one of the test's own faults at its time.
func (r *scheduleRun) inject(f schedule.Fault) {
	time.Sleep(time.Until(r.start.Add(f.At)))
	switch f.Op {
	case schedule.FaultPause:
		r.pause(f.Proc, f.For)
	case schedule.FaultRestore:
		r.restore(f.Server, f.For)
	case schedule.FaultReshard:
		r.reshard(f.For)
	}
}

// reshard moves the Cluster slot of A to another master, as redis-cli
// --cluster reshard does, leaving it split between the two for d: the
// processes meet ASK and TRYAGAIN meanwhile, then MOVED.
func (r *scheduleRun) reshard(d time.Duration) {
	r.resharding.Lock()
	defer r.resharding.Unlock()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := r.cluster.BeginMove(ctx, r.inspect[0].Lock(schedule.ResA).Key())
	if err != nil {
		r.troublef("reshard: %v", err)
		return
	}
	time.Sleep(d)
	if err := m.Finish(ctx); err != nil {
		r.troublef("reshard: %v", err)
		return
	}
	r.t.Logf("slot %d of %s moved from %s to %s at %v, in %v", m.Slot, schedule.ResA, m.From.Addr(), m.To.Addr(),
		time.Since(r.start).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// pause stops a process (SIGSTOP) for d.
func (r *scheduleRun) pause(id string, d time.Duration) {
	p := r.procs[id]
	from := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return // it has exited
	}
	time.Sleep(d)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	r.mu.Lock()
	r.pauses = append(r.pauses, schedule.Span{Proc: id, Start: from, End: time.Now()})
	r.mu.Unlock()
}

// restore is a stale replica promoted: SAVE, d of traffic, then a restart
// that loads the snapshot. The holds it brings back belong to nobody, as an
// operator would find them; the test clears them with ForceUnlock, which
// must hand the lock on to the waiters really waiting.
func (r *scheduleRun) restore(server int, d time.Duration) {
	srv := r.servers[server]
	rdb := srv.Client()
	defer rdb.Close()
	if err := rdb.Save(context.Background()).Err(); err != nil {
		r.troublef("restore: SAVE: %v", err)
		return
	}
	time.Sleep(d)
	r.restoring.Store(true)
	defer r.restoring.Store(false)
	r.mu.Lock()
	r.forced = append(r.forced, time.Now())
	r.mu.Unlock()
	if err := srv.RestartErr(); err != nil {
		r.troublef("%v", err)
		return
	}
	for res, s := range resourceServer {
		if s == server {
			r.forceUnlockAll(r.inspect[server], res)
		}
	}
	if r.plan.Kind == schedule.KindSema {
		// The restored snapshot lacks the claims made after it: a waiter
		// that queued since then queues again at its next periodic attempt.
		r.mu.Lock()
		r.forced = append(r.forced, time.Now())
		r.mu.Unlock()
	}
}

func (r *scheduleRun) forceUnlockAll(c *relock.Client, res string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var err error
	switch r.plan.Kind {
	case schedule.KindSema:
		// ForceRelease frees the stale permits (the restored holds), as an
		// operator would; deleting the hash alone would leave its sorted
		// sets (holds by lease end, the queue) behind.
		_, err = c.Semaphore(res, 1).ForceRelease(ctx)
	case schedule.KindLatch:
		return // a restored latch keeps its count: its setter deletes it at the round's end
	case schedule.KindFair:
		_, err = c.FairLock(res).ForceUnlock(ctx)
	case schedule.KindRW:
		if _, err = c.RWLock(res).WriteLock().ForceUnlock(ctx); err == nil {
			_, err = c.RWLock(res).ReadLock().ForceUnlock(ctx)
		}
	default:
		_, err = c.Lock(res).ForceUnlock(ctx)
	}
	if err != nil {
		r.troublef("restore: ForceUnlock %s: %v", res, err)
	}
}

// waitFree waits up to patience for every resource to be free in Redis.
func (r *scheduleRun) waitFree(patience time.Duration) {
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		s := r.sampleOnce(context.Background())
		if s.Known && !anyHeld(s) {
			return
		}
		time.Sleep(sampleEvery)
	}
}

func anyHeld(s schedule.Sample) bool {
	if s.Sema.Used > 0 || s.Sema.Waiters > 0 {
		return true
	}
	for _, h := range s.Held {
		if h {
			return true
		}
	}
	return false
}

// keyServers are the redis-servers that hold the run's keys: its own, or
// its Cluster's nodes.
func (r *scheduleRun) keyServers() []*redistest.Server {
	if r.cluster != nil {
		return r.cluster.Nodes
	}
	return r.servers
}

// checkLeftover: once every process has ended, nothing is held, and every
// key left (latches, tails) carries a TTL.
func (r *scheduleRun) checkLeftover(v *schedule.Verdict) {
	ctx := context.Background()
	for res, srv := range r.resources() {
		if srv >= len(r.inspect) {
			continue
		}
		if held, err := r.held(ctx, res); err != nil || held {
			v.AddProblem(schedule.RuleLeftover, "%s still held in Redis %v after every process finished (inspect error: %v)",
				res, schedule.Bound, err)
		}
	}
	for _, srv := range r.keyServers() {
		rdb := srv.Client()
		keys, _ := rdb.Keys(ctx, "*").Result()
		for _, k := range keys {
			if r.restoredLatch(k) {
				continue
			}
			if ttl, err := rdb.PTTL(ctx, k).Result(); err == nil && ttl == -1 { // PTTL: -1 no TTL, -2 gone
				v.AddProblem(schedule.RuleLeftover, "key %s has no TTL after the run", k)
			}
		}
		_ = rdb.Close()
	}
}

// restoredLatch reports whether key is a latch of a plan that restored a
// snapshot: the snapshot brings back latches their setters deleted since,
// which nothing deletes again.
func (r *scheduleRun) restoredLatch(key string) bool {
	if r.plan.Kind != schedule.KindLatch || !slices.ContainsFunc(r.plan.Faults, func(f schedule.Fault) bool { return f.Op == schedule.FaultRestore }) {
		return false
	}
	for i := range r.plan.Rounds {
		if r.inspect[0].CountDownLatch(schedule.LatchName(i)).Key() == key {
			return true
		}
	}
	return false
}
