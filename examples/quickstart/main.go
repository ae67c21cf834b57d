// Command quickstart shows relock's reentrant lock on the order example from
// Redisson's docs: createOrder takes the lock and calls deductStock, which
// takes it again (re-entry), while a second instance of the service waits for
// it.
//
//	go run ./examples/quickstart                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func main() {
	start := time.Now()
	say := func(who, format string, args ...any) {
		fmt.Printf("%6.1fms  %-10s %s\n", float64(time.Since(start).Microseconds())/1000, who, fmt.Sprintf(format, args...))
	}

	opts, where := redisOptions()
	fmt.Println("relock quickstart on", where)

	// Two Clients on two connections: two instances of an order service.
	rdbA, rdbB := redis.NewClient(opts), redis.NewClient(opts)
	defer rdbA.Close()
	defer rdbB.Close()
	instanceA, instanceB := relock.New(rdbA), relock.New(rdbB)
	defer instanceA.Close()
	defer instanceB.Close()

	ctx := context.Background()
	lockA := instanceA.Lock("order:1001")

	deductStock := func(ctx context.Context) error {
		ctx, err := lockA.Lock(ctx) // same owner: re-enters, no deadlock
		if err != nil {
			return err
		}
		defer lockA.Unlock(ctx)
		n, _ := lockA.HoldCount(ctx)
		say("A", "deductStock: re-entered the lock, hold count %d", n)
		return nil
	}

	locked := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // createOrder on instance A
		defer wg.Done()
		ctx, err := lockA.Lock(ctx)
		if err != nil {
			log.Fatal(err)
		}
		token, _ := lockA.Token(ctx)
		n, _ := lockA.HoldCount(ctx)
		say("A", "createOrder: locked %q (hold count %d, fencing token %d)", lockA.Name(), n, token)
		if err := deductStock(ctx); err != nil {
			log.Fatal(err)
		}
		close(locked)
		<-release
		if err := lockA.Unlock(ctx); err != nil {
			log.Fatal(err)
		}
		say("A", "createOrder: unlocked; the lock's context ends with %q", context.Cause(ctx))
	}()

	<-locked
	lockB := instanceB.Lock("order:1001")
	if held, err := lockB.TryLock(ctx, 0, 0); err != nil {
		say("B", "TryLock without waiting: %v", err)
	} else {
		_ = lockB.Unlock(held) // not expected: A holds it
	}
	got := make(chan context.Context)
	go func() {
		say("B", "Lock: waiting (asleep on the unlock channel, not polling)")
		ctx, err := lockB.Lock(ctx)
		if err != nil {
			log.Fatal(err)
		}
		got <- ctx
	}()
	time.Sleep(50 * time.Millisecond) // let B start waiting, so the demo shows the hand-off
	close(release)
	ctxB := <-got
	token, _ := lockB.Token(ctxB)
	say("B", "Lock: got it right after A's unlock (fencing token %d)", token)
	ttl, _ := lockB.TTL(ctxB)
	say("B", "lease left %v, renewed by the watchdog while held", ttl.Round(time.Second))
	if err := lockB.Unlock(ctxB); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	locked2, _ := lockB.IsLocked(ctx)
	say("B", "unlocked; IsLocked = %v", locked2)
}

// redisOptions uses REDIS_URL when set, otherwise an embedded miniredis.
func redisOptions() (*redis.Options, string) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			log.Fatalf("REDIS_URL: %v", err)
		}
		return opts, opts.Addr
	}
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	return &redis.Options{Addr: m.Addr()}, "an embedded miniredis (set REDIS_URL to use your Redis)"
}
