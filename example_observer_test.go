package relock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock"
)

// An Observer's hooks see every hold from its acquisition to its end: a
// final Unlock, or a loss with its reason (here a ForceUnlock, and a hold
// still open when the Client closes).
func ExampleWithObserver() {
	rdb, done := exampleRedis()
	defer done()
	obs := &relock.Observer{
		Acquired: func(_ context.Context, e relock.AcquiredEvent) {
			fmt.Printf("acquired %s %q: attempts=%d reentry=%v\n", e.Kind, e.Name, e.Attempts, e.Reentry)
		},
		Released: func(_ context.Context, e relock.ReleasedEvent) {
			fmt.Printf("released %s %q: final=%v\n", e.Kind, e.Name, e.Final)
		},
		Lost: func(e relock.LostEvent) {
			fmt.Printf("lost %s %q: %s\n", e.Kind, e.Name, e.Reason)
		},
	}
	c := relock.New(rdb, relock.WithObserver(obs))
	orders := c.Lock("orders")
	ctx := context.Background()

	held, _ := orders.Lock(ctx)
	inner, _ := orders.Lock(held) // a re-entry runs one script too
	_ = orders.Unlock(inner)
	_ = orders.Unlock(held)

	held, _ = orders.Lock(ctx)
	_, _ = orders.ForceUnlock(ctx) // an operator frees it

	_, _ = c.Lock("report").Lock(ctx)
	_ = c.Close() // with "report" still held: Close releases it
	// Output:
	// acquired lock "orders": attempts=1 reentry=false
	// acquired lock "orders": attempts=1 reentry=true
	// released lock "orders": final=false
	// released lock "orders": final=true
	// acquired lock "orders": attempts=1 reentry=false
	// lost lock "orders": force_unlocked
	// acquired lock "report": attempts=1 reentry=false
	// released lock "report": final=true
}

// WaitStarted and WaitEnded come in pairs, so they keep a gauge of the
// goroutines waiting now; Woken tells a waiter was woken by a release rather
// than by its fallback timer.
func ExampleObserver_waiters() {
	rdb, done := exampleRedis()
	defer done()
	var waiting, woken atomic.Int64
	obs := &relock.Observer{
		WaitStarted: func(context.Context, relock.LockInfo) { waiting.Add(1) },
		Woken:       func(context.Context, relock.LockInfo) { woken.Add(1) },
		WaitEnded: func(_ context.Context, e relock.WaitEvent) {
			waiting.Add(-1)
			fmt.Printf("wait ended %q: not obtained=%v\n", e.Name, e.NotObtained)
		},
	}
	c := relock.New(rdb, relock.WithObserver(obs))
	defer c.Close()
	orders := c.Lock("orders")
	held, _ := orders.Lock(context.Background())

	got := make(chan context.Context)
	go func() {
		h, _ := orders.Lock(context.Background()) // waits for held
		got <- h
	}()
	for waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("waiting:", waiting.Load())
	_ = orders.Unlock(held)
	_ = orders.Unlock(<-got)
	fmt.Println("waiting:", waiting.Load(), "woken:", woken.Load() > 0)
	// Output:
	// waiting: 1
	// wait ended "orders": not obtained=false
	// waiting: 0 woken: true
}
