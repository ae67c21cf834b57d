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
// The rule is a token count, not a timer: up to coalesceInFlight sends may be
// in flight per Client. A call that finds a token free is sent at once, on
// its own goroutine, exactly as without coalescing (one EVALSHA: a lone
// caller pays no added latency and the same round trips). A call that finds
// none queues; when a send returns, the calls queued meanwhile (at most
// coalesceMaxBatch) leave as the next batch, sent by the first of them, on
// its goroutine, which then hands its token on in the same way.
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
// Deadlines. A call whose context can end is coalesced only when it ends
// at its deadline alone (a deadlineCtx: an inline release on a go-redis
// client that enforces deadlines, see inline.go); any other runs alone
// (Client.eval). For those:
//   - a queued call whose deadline passes before its batch is taken leaves
//     the queue and fails with errNotSent: not sent, a definite outcome
//     (a release is then retried in the background);
//   - calls with a deadline and calls without one never share a batch (a
//     batch takes the queued calls of its first call's kind, in order), so
//     no call is cut by another's deadline: an acquire cut by a release's
//     deadline failed its Lock with ErrUnavailable where the Lock's own
//     bound was to end it (TestCallsReturnByTheCallersBoundWithContextTimeouts
//     failed so under load);
//   - a batch of calls with deadlines is sent under the earliest of them,
//     so no call waits past its own; a batch cut there fails each of its
//     calls as outcome unknown (releases all, retried in the background).
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
	mu       sync.Mutex
	inFlight int
	queue    []*queuedCall
	// sends and calls count, under mu, the sends made and the calls they
	// carried: calls/sends is the batch size achieved (benchmarks read it).
	sends, calls uint64
}

const (
	// coalesceInFlight is how many sends of one Client may be in flight
	// before calls queue. More sends in flight means smaller batches; fewer
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
)

// A queuedCall is a script call waiting for its batch. Queued calls are
// pooled (queuedCalls), their channel with them: a busy Client queues most
// of its calls, and two allocations each were a tenth of a cycle's.
type queuedCall struct {
	sc       scriptCall
	deadline time.Time // the call's context's, zero for none
	cmd      *redis.Cmd
	batch    []*queuedCall // set when this call sends the batch (itself first)
	ready    chan struct{} // receives once: the reply is in cmd, or batch is set
}

// errNotSent fails a queued call whose deadline passed before its batch was
// taken: it left the queue unsent, so its outcome is definite (it did not
// run), and the call is retried as any that failed (a release, in the
// background).
var errNotSent = fmt.Errorf("%w: relock: the call's deadline passed while it waited for its batch; not sent", ErrUnavailable)

var queuedCalls = sync.Pool{New: func() any { return &queuedCall{ready: make(chan struct{}, 1)} }}

// take returns q's reply and gives q back to the pool. Only q's caller
// calls it, once q has received on ready: nothing refers to q any more
// (the batch that held it is done with it).
func (q *queuedCall) take() *redis.Cmd {
	cmd := q.cmd
	*q = queuedCall{ready: q.ready}
	queuedCalls.Put(q)
	return cmd
}

// run runs sc on rdb, alone when a send token is free, else in the next
// batch (see coalescer), and returns its reply.
func (co *coalescer) run(ctx context.Context, rdb redis.UniversalClient, sc scriptCall) *redis.Cmd {
	co.mu.Lock()
	if co.inFlight < coalesceInFlight {
		co.inFlight++
		co.sends++
		co.calls++
		co.mu.Unlock()
		cmd := sc.run(ctx, rdb)
		co.handOn()
		return cmd
	}
	q := queuedCalls.Get().(*queuedCall)
	q.sc = sc
	q.deadline, _ = ctx.Deadline()
	co.queue = append(co.queue, q)
	co.mu.Unlock()
	if !co.await(ctx, q) {
		return failedCmd(ctx, errNotSent)
	}
	if q.batch != nil {
		send(ctx, rdb, q.batch)
		co.handOn()
	}
	return q.take()
}

// await waits for q's turn and reports whether it came; false when q's
// context ended (its deadline) first and q left the queue unsent. A q
// already taken into a batch waits on: the batch is sent under a deadline
// no later than q's.
func (co *coalescer) await(ctx context.Context, q *queuedCall) bool {
	select {
	case <-q.ready:
		return true
	case <-ctx.Done(): // nil for a context that cannot end: never
	}
	co.mu.Lock()
	i := slices.Index(co.queue, q)
	if i >= 0 {
		co.queue = slices.Delete(co.queue, i, i+1)
	}
	co.mu.Unlock()
	if i < 0 {
		<-q.ready
		return true
	}
	*q = queuedCall{ready: q.ready}
	queuedCalls.Put(q)
	return false
}

// handOn is called when a send returns: its token goes to the calls queued
// meanwhile, as one batch whose first call sends it, or back to the pool.
// Calls whose deadline has passed leave (expire) instead of joining it.
func (co *coalescer) handOn() {
	for {
		co.mu.Lock()
		if len(co.queue) == 0 {
			co.inFlight--
			co.mu.Unlock()
			return
		}
		batch := co.takeBatch()
		co.sends++
		co.calls += uint64(len(batch))
		co.mu.Unlock()
		if batch = expire(batch); len(batch) > 0 {
			batch[0].batch = batch
			batch[0].ready <- struct{}{}
			return
		}
	}
}

// takeBatch takes the next batch from the queue (co.mu held): up to
// coalesceMaxBatch calls of the first queued call's kind (with a deadline
// or without), in queue order; the others keep their order in the queue.
// When the first calls are all of one kind, as they are but while inline
// releases and other calls meet, the batch is the queue's front, as is.
func (co *coalescer) takeBatch() []*queuedCall {
	n := min(len(co.queue), coalesceMaxBatch)
	bounded := !co.queue[0].deadline.IsZero()
	if i := slices.IndexFunc(co.queue[:n], func(q *queuedCall) bool { return !q.deadline.IsZero() != bounded }); i < 0 {
		batch := co.queue[:n:n]
		co.queue = co.queue[n:]
		if len(co.queue) == 0 {
			co.queue = nil
		}
		return batch
	}
	var batch, rest []*queuedCall
	for _, q := range co.queue {
		if len(batch) < coalesceMaxBatch && !q.deadline.IsZero() == bounded {
			batch = append(batch, q)
		} else {
			rest = append(rest, q)
		}
	}
	co.queue = rest
	return batch
}

// expire fails the calls of batch whose deadline has passed (errNotSent)
// and returns the others, in order.
func expire(batch []*queuedCall) []*queuedCall {
	var now time.Time
	kept := batch[:0]
	for _, q := range batch {
		if !q.deadline.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			if !now.Before(q.deadline) {
				q.cmd = failedCmd(context.Background(), errNotSent)
				q.ready <- struct{}{}
				continue
			}
		}
		kept = append(kept, q)
	}
	return kept
}

// send sends a batch (one call: as it would go alone) under the earliest
// deadline of its calls, and gives every call but the sender's its reply.
func send(ctx context.Context, rdb redis.UniversalClient, batch []*queuedCall) {
	if len(batch) == 1 {
		batch[0].cmd = batch[0].sc.run(ctx, rdb)
		return
	}
	if first := earliest(batch); !first.IsZero() {
		if d, ok := ctx.Deadline(); !ok || first.Before(d) {
			// The sender's own deadline is among the batch's: only its
			// values are kept, and nothing outlives the send.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), first)
			defer cancel()
		}
	}
	calls := make([]scriptCall, len(batch))
	for i, q := range batch {
		calls[i] = q.sc
	}
	cmds, _ := evalPipeline(ctx, rdb, calls, nil)
	for i, q := range batch {
		q.cmd = cmds[i]
		if i > 0 {
			q.ready <- struct{}{}
		}
	}
}

// earliest is the earliest deadline of the calls of batch, zero for none.
func earliest(batch []*queuedCall) time.Time {
	var first time.Time
	for _, q := range batch {
		if !q.deadline.IsZero() && (first.IsZero() || q.deadline.Before(first)) {
			first = q.deadline
		}
	}
	return first
}
