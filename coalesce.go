package relock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Coalescing: script calls that goroutines of one Client issue at the same
// time go to Redis together, one pipeline per flush (go-redis's Cluster
// pipeline splits it into one per node, sent at once). A Client that serves
// many goroutines then pays one write and one read per batch on both sides
// instead of one per call — the gap to auto-pipelining clients (rueidis).
//
// The rule is a token count per node, not a timer: up to coalesceInFlight
// sends may be in flight to each node — each connection pool: a Cluster's
// master (by the slot map go-redis holds), a Ring's shard, the one server
// of a plain or failover client — before calls for it queue. Nodes never
// share tokens: a hung node's sends, which hold theirs until go-redis's
// read timeout, hold up no call on another node (a Cluster pipeline would
// wait for its slowest node, so a batch holds one node's calls). A call
// that finds a token free is sent at once, on its own goroutine, exactly
// as without coalescing (one EVALSHA: a lone caller pays no added latency
// and the same round trips). A call that finds none queues; when a send
// returns, the calls queued meanwhile for its node (at most
// coalesceMaxBatch) leave as the next batch, sent by one of them, on its
// goroutine, which then hands its token on in the same way. The batch goes
// through rdb, which routes it (and follows MOVED and ASK) as it would the
// calls sent alone, also when the slot map changed since the call queued.
//
// Nothing else changes for a call: its script runs as it would alone (each
// is atomic, and replays are recognised by op id, so a pipeline go-redis
// resends after a network error is as safe as a resent call); its reply or
// error is its own, read per command (a network error fails every call of
// the batch, each as outcome unknown, as it would have failed them alone);
// NOSCRIPT is answered by evalPipeline as by redis.Script.Run; and a caller
// with a bound waits for its call no longer than the bound (bounded.go runs
// the call detached whichever way it is sent). Calls of one owner on one
// lock never share a batch: the hold record's semaphore keeps them in order.
// A batch is sent with the context of the call that sends it: scripts run
// detached from their callers' contexts anyway; only values a hook reads
// (a trace span) come from that call.
//
// Bounds. A call whose context can end is coalesced only when it ends at
// its deadline alone (a deadlineCtx: an inline release on a go-redis
// client that enforces deadlines, see inline.go); any other runs alone
// (Client.eval). No call waits past its own bound for another:
//   - a queued call whose deadline passes before its batch is taken leaves
//     the queue and fails with errNotSent: not sent, a definite outcome
//     (a release is then retried in the background);
//   - a queued call without a deadline waits for its batch at most
//     go-redis's PoolTimeout, as go-redis waits for a connection, then
//     fails with errQueueTimeout, not sent; its send is bounded by
//     go-redis's own timeouts. So the package doc's "bounded by go-redis's
//     own timeouts" counts the time queued in the Client;
//   - calls with a deadline and calls without one never share a batch (a
//     batch takes the queued calls of its first call's kind, in order), so
//     no call without a deadline is cut by another's (an acquire so cut
//     would fail its Lock with ErrUnavailable before the Lock's own bound);
//   - a batch of calls with deadlines is sent by the call whose deadline is
//     the latest, under it; every other caller waits for its reply until
//     its own deadline only, then returns (errCutInBatch: outcome unknown,
//     as when go-redis cuts a call at its deadline; a release is retried in
//     the background).
//
// go-redis's own auto-pipelining (v9.23, AutoPipeline, experimental) was
// measured as this transport, half- and full-duplex, and left out: on the
// shared-Client benchmark (BenchmarkSharedClient, 64 goroutines) neither
// moved ns/op beyond the noise of a 2-core machine (Redis's CPU bounds
// that workload); with a Client per worker (BenchmarkOwnKeysParts)
// full-duplex saved ~6% of the client's CPU, half-duplex cost ~22 more
// allocations a cycle. Its contracts differ from ours (a hook cannot stop
// a full-duplex command, which also holds a connection and two goroutines
// per Client; NOSCRIPT is not normalised on its deferred face; on a
// Cluster it pipelines to masters only), and it is experimental.
type coalescer struct {
	initOnce sync.Once
	// node names the connection pool that serves key (a Cluster's master, a
	// Ring's shard); nil when rdb has one pool (a plain or failover client).
	node func(ctx context.Context, key string) string
	// queueBound is how long a call without a deadline waits for a send:
	// go-redis's PoolTimeout, its wait for a connection.
	queueBound time.Duration

	mu    sync.Mutex
	one   lane             // the lane of a client with one pool
	lanes map[string]*lane // per node, when node is set
	// sends and calls count, under mu, the sends made and the calls they
	// carried: calls/sends is the batch size achieved (benchmarks read it).
	sends, calls uint64
}

// A lane is the sends in flight to one node and the calls queued for it.
// Nodes never wait for each other: a hung node fills its own lane only.
type lane struct {
	inFlight int
	queue    []*queuedCall
	// timer fails the queued calls without a deadline once their
	// queueBound passes; armed says it is set.
	timer *time.Timer
	armed bool
}

const (
	// coalesceInFlight is how many sends to one node (one connection
	// pool) may be in flight before calls queue. More sends in flight means smaller batches; fewer
	// means a batch waits longer for the one in flight. Measured on 2
	// cores, 64 goroutines (BenchmarkSharedClient, 1 Client; bench's
	// BenchmarkSharedClientPeers, 2 Clients; medians of 4, interleaved):
	// 1 makes batches of ~31 calls (2: ~19, 3: ~14) and saves Redis ~0.5
	// µs a cycle of its ~14, but one Client then leaves Redis idle while
	// its batch's callers run (ns/op +19% against 2); with 2 Clients 1, 2
	// and 3 are within the noise, and the client's CPU is the same for all
	// three. Redis's CPU is mostly the scripts' own (script-µs/op).
	coalesceInFlight = 2
	// coalesceMaxBatch bounds a batch: a larger one would hold its callers
	// for the encoding and reading of all the others.
	coalesceMaxBatch = 128
	// maxIdleLanes is how many idle lanes a Client keeps: beyond it a lane
	// that falls idle is dropped, so that nodes that come and go (a
	// Cluster's addresses over its life) do not pile up.
	maxIdleLanes = 64
)

// A queuedCall is a script call waiting for its batch. Queued calls are
// pooled (queuedCalls), their channel with them: a busy Client queues most
// of its calls, and two allocations each would be a tenth of a cycle's.
type queuedCall struct {
	sc       scriptCall
	deadline time.Time // the call's context's, zero for none
	expires  time.Time // for a call without a deadline: when it stops waiting for a send
	cmd      *redis.Cmd
	batch    []*queuedCall // set, under mu, when this call sends the batch
	ready    chan struct{} // receives once: the reply is in cmd, or batch is set
}

// errNotSent fails a queued call whose deadline passed before its batch was
// taken: it left the queue unsent, so its outcome is definite (it did not
// run), and the call is retried as any that failed (a release, in the
// background).
var errNotSent = fmt.Errorf("%w: relock: the call's deadline passed while it waited for its batch; not sent", ErrUnavailable)

// errQueueTimeout fails a queued call without a deadline that waited
// go-redis's PoolTimeout for a send to its node: the node's sends in flight
// had not returned. It was not sent: a definite outcome.
var errQueueTimeout = fmt.Errorf("%w: relock: the node's requests in flight had not returned within go-redis's pool timeout; not sent", ErrUnavailable)

// errCutInBatch fails a call whose deadline passed while the batch another
// call sends for it was in flight: its outcome is unknown (it may run), as
// when go-redis cuts a call at its deadline.
var errCutInBatch = fmt.Errorf("relock: the call's deadline passed while its batch was in flight: %w", context.DeadlineExceeded)

var queuedCalls = sync.Pool{New: func() any { return &queuedCall{ready: make(chan struct{}, 1)} }}

// take returns q's reply and gives q back to the pool. Only q's caller
// calls it, once q has received on ready: nothing refers to q any more
// (the batch that held it is done with it).
func (q *queuedCall) take() *redis.Cmd {
	cmd := q.cmd
	q.recycle()
	return cmd
}

func (q *queuedCall) recycle() {
	*q = queuedCall{ready: q.ready}
	queuedCalls.Put(q)
}

// init learns from rdb how it pools connections and how long go-redis
// waits for one.
func (co *coalescer) init(rdb redis.UniversalClient) {
	co.queueBound = poolTimeout(rdb)
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		co.node = func(ctx context.Context, key string) string {
			if n, err := r.MasterForKey(ctx, key); err == nil {
				return n.Options().Addr
			}
			return "" // the send fails the same way, or finds the node
		}
	case *redis.Ring:
		co.node = func(_ context.Context, key string) string {
			if n, err := r.GetShardClientForKey(key); err == nil {
				return n.Options().Addr
			}
			return ""
		}
	}
}

// poolTimeout is how long rdb waits for a connection from its pool, as
// go-redis sets it (ReadTimeout + 1 s unless set; go-redis's default for a
// client it does not know).
func poolTimeout(rdb redis.UniversalClient) time.Duration {
	t, ok := timeoutsOf(rdb)
	if !ok {
		t.read = 3 * time.Second
	}
	switch {
	case t.pool > 0:
		return t.pool
	case t.read > 0:
		return t.read + time.Second
	}
	return 30 * time.Second
}

// laneFor returns the lane of the node that serves sc (co.mu held by the
// caller on return; node is looked up before, outside it).
func (co *coalescer) laneFor(ctx context.Context, sc scriptCall) *lane {
	if co.node == nil || len(sc.keys) == 0 {
		co.mu.Lock()
		return &co.one
	}
	addr := co.node(ctx, sc.keys[0])
	co.mu.Lock()
	l := co.lanes[addr]
	if l == nil {
		if co.lanes == nil {
			co.lanes = make(map[string]*lane)
		}
		l = &lane{}
		co.lanes[addr] = l
	}
	return l
}

// run runs sc on rdb, alone when a send to its node is free, else in the
// next batch to that node (see coalescer), and returns its reply.
func (co *coalescer) run(ctx context.Context, rdb redis.UniversalClient, sc scriptCall) *redis.Cmd {
	co.initOnce.Do(func() { co.init(rdb) })
	l := co.laneFor(ctx, sc)
	if l.inFlight < coalesceInFlight {
		l.inFlight++
		co.sends++
		co.calls++
		co.mu.Unlock()
		cmd := sc.run(ctx, rdb)
		co.handOn(l)
		return cmd
	}
	q := queuedCalls.Get().(*queuedCall)
	q.sc = sc
	if d, ok := ctx.Deadline(); ok {
		q.deadline = d
	} else if co.queueBound > 0 {
		q.expires = time.Now().Add(co.queueBound)
		co.arm(l, q.expires)
	}
	l.queue = append(l.queue, q)
	co.mu.Unlock()
	if failed := co.await(ctx, l, q); failed != nil {
		return failed
	}
	if q.batch != nil {
		if ctx.Err() != nil {
			// Its deadline, the batch's latest, has passed: so have all
			// the others', and their callers have returned.
			fail(q.batch, errNotSent, q)
		} else {
			send(ctx, rdb, q)
		}
		co.handOn(l)
	}
	return q.take()
}

// await waits for q's turn: nil when it came, else the reply of a call
// that gave up: its deadline passed while it was queued (errNotSent, it
// left the queue) or while the batch another call sends for it was in
// flight (errCutInBatch; q is left to that batch). A call whose deadline
// passes as it is picked to send the batch sends it (see run).
func (co *coalescer) await(ctx context.Context, l *lane, q *queuedCall) *redis.Cmd {
	select {
	case <-q.ready:
		return nil
	case <-ctx.Done(): // nil for a context that cannot end: never
	}
	co.mu.Lock()
	i := slices.Index(l.queue, q)
	if i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
	}
	sender := q.batch != nil
	co.mu.Unlock()
	switch {
	case i >= 0:
		q.recycle()
		return failedCmd(ctx, errNotSent)
	case sender:
		<-q.ready
		return nil
	}
	select { // a reply that came with the deadline still counts
	case <-q.ready:
		return nil
	default:
		return failedCmd(ctx, errCutInBatch)
	}
}

// arm sets l's timer to fail the queued calls without a deadline at at,
// unless it is set already (for an earlier call). co.mu is held.
func (co *coalescer) arm(l *lane, at time.Time) {
	if l.armed {
		return
	}
	l.armed = true
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Until(at), func() { co.expireQueued(l) })
		return
	}
	l.timer.Reset(time.Until(at))
}

// expireQueued fails the calls of l's queue that waited their queueBound
// (errQueueTimeout) and sets the timer for the next one. Calls without a
// deadline queue in the order they expire.
func (co *coalescer) expireQueued(l *lane) {
	co.mu.Lock()
	defer co.mu.Unlock()
	l.armed = false
	now := time.Now()
	kept := l.queue[:0]
	for _, q := range l.queue {
		if !q.expires.IsZero() && !now.Before(q.expires) {
			q.cmd = failedCmd(context.Background(), errQueueTimeout)
			q.ready <- struct{}{}
			continue
		}
		kept = append(kept, q)
	}
	clear(l.queue[len(kept):])
	l.queue = kept
	if i := slices.IndexFunc(l.queue, func(q *queuedCall) bool { return !q.expires.IsZero() }); i >= 0 {
		co.arm(l, l.queue[i].expires)
	}
}

// handOn is called when a send to l's node returns: its slot goes to the
// calls queued meanwhile, as one batch that one of them sends, or back to
// the lane. Calls whose deadline or queue bound has passed leave (expire)
// instead of joining it.
func (co *coalescer) handOn(l *lane) {
	co.mu.Lock()
	for len(l.queue) > 0 {
		batch := co.takeBatch(l)
		co.sends++
		co.calls += uint64(len(batch))
		if batch = expire(batch); len(batch) > 0 {
			sender := batch[latest(batch)]
			sender.batch = batch
			co.mu.Unlock()
			sender.ready <- struct{}{}
			return
		}
	}
	l.inFlight--
	if l.inFlight == 0 && l != &co.one && len(co.lanes) > maxIdleLanes {
		for addr, m := range co.lanes {
			if m == l {
				delete(co.lanes, addr)
				break
			}
		}
	}
	co.mu.Unlock()
}

// takeBatch takes the next batch from l's queue (co.mu held): up to
// coalesceMaxBatch calls of the first queued call's kind (with a deadline
// or without), in queue order; the others keep their order in the queue.
// When the first calls are all of one kind, as they are but while inline
// releases and other calls meet, the batch is the queue's front, as is.
func (co *coalescer) takeBatch(l *lane) []*queuedCall {
	n := min(len(l.queue), coalesceMaxBatch)
	bounded := !l.queue[0].deadline.IsZero()
	if i := slices.IndexFunc(l.queue[:n], func(q *queuedCall) bool { return !q.deadline.IsZero() != bounded }); i < 0 {
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
		if len(l.queue) == 0 {
			l.queue = nil
		}
		return batch
	}
	var batch, rest []*queuedCall
	for _, q := range l.queue {
		if len(batch) < coalesceMaxBatch && !q.deadline.IsZero() == bounded {
			batch = append(batch, q)
		} else {
			rest = append(rest, q)
		}
	}
	l.queue = rest
	return batch
}

// expire fails the calls of batch whose deadline (errNotSent) or queue
// bound (errQueueTimeout) has passed and returns the others, in order.
func expire(batch []*queuedCall) []*queuedCall {
	var now time.Time
	kept := batch[:0]
	for _, q := range batch {
		if end := q.deadline; !end.IsZero() || !q.expires.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			err := errNotSent
			if end.IsZero() {
				end, err = q.expires, errQueueTimeout
			}
			if !now.Before(end) {
				q.cmd = failedCmd(context.Background(), err)
				q.ready <- struct{}{}
				continue
			}
		}
		kept = append(kept, q)
	}
	return kept
}

// latest is the index of the call of batch whose deadline is the latest
// (0 for a batch without deadlines): it sends the batch, under its own
// context, so that no call is cut at another's deadline; a call whose
// deadline comes first returns then (see await).
func latest(batch []*queuedCall) int {
	last := 0
	for i, q := range batch {
		if q.deadline.After(batch[last].deadline) {
			last = i
		}
	}
	return last
}

// fail gives every call of batch but sender err as its reply, unsent.
func fail(batch []*queuedCall, err error, sender *queuedCall) {
	for _, q := range batch {
		q.cmd = failedCmd(context.Background(), err)
		if q != sender {
			q.ready <- struct{}{}
		}
	}
}

// send sends sender's batch (one call: as it would go alone) under
// sender's context, and gives every other call its reply.
func send(ctx context.Context, rdb redis.UniversalClient, sender *queuedCall) {
	batch := sender.batch
	if len(batch) == 1 {
		sender.cmd = sender.sc.run(ctx, rdb)
		return
	}
	calls := make([]scriptCall, len(batch))
	for i, q := range batch {
		calls[i] = q.sc
	}
	cmds, _ := evalPipeline(ctx, rdb, calls, nil)
	for i, q := range batch {
		q.cmd = cmds[i]
		if q != sender {
			q.ready <- struct{}{}
		}
	}
}
