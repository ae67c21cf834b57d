// Command worker is a job worker written the way a service runs relock in
// production: a loop under signal.NotifyContext, a deadline per job, the
// hold context for the guarded work, context.WithoutCancel where work must
// finish once begun, a fencing-token check on commit, Do with its release
// error told apart from the job's, and Close on SIGTERM.
//
//	go run ./examples/worker                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/worker
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/examples/internal/exampleredis"
)

// ledger is the store the lock protects. It keeps, per order, the largest
// fencing token it has committed with and refuses a commit that carries a
// smaller one: a worker whose lock was lost (a pause past its lease) cannot
// overwrite the work of the worker that took the lock after it.
type ledger struct {
	mu     sync.Mutex
	tokens map[string]int64
	totals map[string]int
}

func (l *ledger) Commit(ctx context.Context, token int64, order string, total int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if token < l.tokens[order] {
		return fmt.Errorf("order %s: stale fencing token %d, %d already committed", order, token, l.tokens[order])
	}
	l.tokens[order], l.totals[order] = token, total
	return nil
}

type job struct {
	order string
	items int
}

// jobTimeout bounds one job: waiting for its lock and doing its work.
const jobTimeout = 300 * time.Millisecond

var story *exampleredis.Story

func main() {
	srv := exampleredis.Open()
	defer srv.Close()
	story = exampleredis.NewStory("relock worker on " + srv.Where)

	// SIGINT or SIGTERM ends ctx: the loop takes no new job, the job in
	// hand finishes, then Close releases whatever is still held.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	worker := srv.Relock() // one Client per process
	other := srv.Relock()  // another process of the same service
	store := &ledger{tokens: map[string]int64{}, totals: map[string]int{}}

	// The other process holds order 3 for longer than a job may wait.
	busy, err := other.Lock("order:3").Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	story.Say("other", "holds order:3 for a while")

	jobs := make(chan job, 4)
	for i, n := range []int{2, 5, 1, 4} {
		jobs <- job{order: fmt.Sprint(i + 1), items: n}
	}
	close(jobs)

	run(ctx, worker, store, jobs)
	story.Say("worker", "SIGTERM: stopped taking jobs; closing the Client")
	if err := worker.Close(); err != nil {
		log.Fatal(err)
	}
	_ = other.Lock("order:3").Unlock(busy)
	story.Say("worker", "closed: committed %v", store.totals)
}

// run takes jobs until ctx ends or the queue is empty.
func run(ctx context.Context, c *relock.Client, store *ledger, jobs <-chan job) {
	for {
		select {
		case <-ctx.Done():
			return
		case j, ok := <-jobs:
			if !ok {
				// A real worker waits for more work; here the orchestrator
				// stops the service once the queue is drained.
				go terminate()
				<-ctx.Done()
				return
			}
			if err := process(ctx, c, store, j); err != nil {
				story.Say("worker", "order %s: %v", j.order, err)
			}
		}
	}
}

// process runs one job under the order's lock, within the job's deadline.
func process(ctx context.Context, c *relock.Client, store *ledger, j job) error {
	jctx, cancel := context.WithTimeout(ctx, jobTimeout)
	defer cancel()
	lock := c.Lock("order:" + j.order)
	err := lock.Do(jctx, func(hctx context.Context) error {
		// hctx is the hold: it ends when the lock is lost, so the guarded
		// work stops too. The token fences the commit.
		token, err := lock.Token(hctx)
		if err != nil {
			return err
		}
		total, err := price(hctx, j)
		if err != nil {
			return err
		}
		// Once begun, the commit finishes even if the job's deadline passes
		// meanwhile; the fencing token, not the deadline, keeps it safe.
		if err := store.Commit(context.WithoutCancel(hctx), token, j.order, total); err != nil {
			return err
		}
		story.Say("worker", "order %s: committed %d with fencing token %d", j.order, total, token)
		return nil
	})
	var released *relock.ReleaseError
	switch {
	case errors.As(err, &released):
		// The job committed; only the unlock was not confirmed (the lock
		// expires by its lease). Running the job again would commit twice.
		story.Say("worker", "order %s: done, unlock not confirmed: %v", j.order, released.Err)
		return nil
	case errors.Is(err, relock.ErrNotObtained):
		return fmt.Errorf("not obtained within %v, left for a retry: %w", jobTimeout, err)
	}
	return err
}

// price is the guarded work: it honours the hold context.
func price(ctx context.Context, j job) (int, error) {
	select {
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	case <-time.After(10 * time.Millisecond):
		return j.items * 25, nil
	}
}

// terminate sends this process SIGTERM, as an orchestrator stopping the
// service would.
func terminate() {
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Signal(syscall.SIGTERM)
	}
	if err != nil {
		log.Fatal(err)
	}
}
