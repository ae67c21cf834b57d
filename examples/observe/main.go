// Command observe shows relock's Observer: hooks the Client calls when a
// lock is acquired, released, renewed or lost, when a waiter wakes or gives
// up. Here they print what happens; in production they feed metrics and
// traces (see extra/relockotel for OpenTelemetry). They run on the lock
// operation's goroutine, so a real one must be quick and never block.
//
//	go run ./examples/observe                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/observe
package main

import (
	"context"
	"log"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/examples/internal/exampleredis"
)

func main() {
	srv := exampleredis.Open()
	defer srv.Close()
	story := exampleredis.NewStory("relock observe on " + srv.Where)

	// Two processes of one service; the watchdog renews every 400ms.
	opts := []relock.Option{relock.WithObserver(printer(story)), relock.WithWatchdogLease(1200 * time.Millisecond)}
	procA, procB := srv.Relock(opts...), srv.Relock(opts...)
	ctx := context.Background()
	handOver(ctx, story, procA, procB)
	leaseRunsOut(ctx, story, srv, procA)
	closeWhileHolding(ctx, story, procB)
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// printer is an Observer that tells the story of every event.
func printer(story *exampleredis.Story) *relock.Observer {
	return &relock.Observer{
		Acquired: func(_ context.Context, e relock.AcquiredEvent) {
			story.Say("  event", "acquired %s %q: waited %s, %d attempts, contended=%v reentry=%v token=%d",
				e.Kind, e.Name, ms(e.Wait), e.Attempts, e.Contended, e.Reentry, e.Token)
		},
		Released: func(_ context.Context, e relock.ReleasedEvent) {
			story.Say("  event", "released %s %q: held %s, final=%v err=%v", e.Kind, e.Name, ms(e.Held), e.Final, e.Err)
		},
		Renewed: func(e relock.RenewedEvent) {
			story.Say("  event", "renewed %d holds in %s, %d failed", e.Holds, ms(e.Duration), e.Failed)
		},
		Lost: func(e relock.LostEvent) {
			story.Say("  event", "lost %s %q after %s: %s (%v)", e.Kind, e.Name, ms(e.Held), e.Reason, e.Cause)
		},
		WaitStarted: func(_ context.Context, l relock.LockInfo) {
			story.Say("  event", "wait started %s %q", l.Kind, l.Name)
		},
		WaitEnded: func(_ context.Context, e relock.WaitEvent) {
			story.Say("  event", "wait ended %s %q: waited %s, %d attempts, not obtained=%v", e.Kind, e.Name, ms(e.Waited), e.Attempts, e.NotObtained)
		},
		Woken: func(_ context.Context, l relock.LockInfo) {
			story.Say("  event", "woken %s %q", l.Kind, l.Name)
		},
		SubscriberReconnected: func(e relock.SubscriberEvent) {
			story.Say("  event", "subscriber of %q back after %s: %v", e.Shard, ms(e.Down), e.Err)
		},
	}
}

// handOver: A locks, re-enters and unlocks once; B waits meanwhile (a
// watchdog tick renews A's hold) and gets the lock when A unlocks.
func handOver(ctx context.Context, story *exampleredis.Story, procA, procB *relock.Client) {
	orders := procA.Lock("orders")

	held, err := orders.Lock(ctx)
	check(err)
	story.Say("A", "locked %q", orders.Name())
	inner, err := orders.Lock(held)
	check(err)
	story.Say("A", "re-entered it")
	check(orders.Unlock(inner))
	story.Say("A", "unlocked once (still held)")

	got := make(chan context.Context)
	go func() {
		held, err := procB.Lock("orders").Lock(ctx)
		check(err)
		got <- held
	}()
	story.Say("B", "waits for %q", orders.Name())
	time.Sleep(450 * time.Millisecond) // long enough for one watchdog tick
	check(orders.Unlock(held))
	story.Say("A", "unlocked")
	check(procB.Lock("orders").Unlock(<-got))
	story.Say("B", "got it, then unlocked")
}

// leaseRunsOut: a hold with a fixed lease (no watchdog) ends by itself, and
// its context says so.
func leaseRunsOut(ctx context.Context, story *exampleredis.Story, srv *exampleredis.Server, procA *relock.Client) {
	short, err := procA.Lock("report").TryLock(ctx, 0, 200*time.Millisecond)
	check(err)
	story.Say("A", "locked \"report\" with a 200ms lease, and lets it run out")
	srv.Elapse(300 * time.Millisecond)
	<-short.Done()
	story.Say("A", "its context ended: %v", context.Cause(short))
}

// closeWhileHolding: closing a Client releases its holds and ends their
// contexts.
func closeWhileHolding(ctx context.Context, story *exampleredis.Story, procB *relock.Client) {
	orders := procB.Lock("orders")
	last, err := orders.TryLock(ctx, 0, 0)
	check(err)
	story.Say("B", "locked %q again, and shuts down without unlocking", orders.Name())
	check(procB.Close())
	story.Say("B", "closed its Client: the lock was released and the hold's context ended with %v", context.Cause(last))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
