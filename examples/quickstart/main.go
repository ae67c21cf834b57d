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

var start = time.Now()

// say prints one line of the story: when, who, what.
func say(who, format string, args ...any) {
	fmt.Printf("%6.1fms  %-10s %s\n", float64(time.Since(start).Microseconds())/1000, who, fmt.Sprintf(format, args...))
}

func main() {
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
	lockA, lockB := instanceA.Lock("order:1001"), instanceB.Lock("order:1001")
	locked, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { createOrder(ctx, lockA, locked, release) })
	<-locked
	waitForTheLock(ctx, lockB, release)
	wg.Wait()
	isLocked, _ := lockB.IsLocked(ctx)
	say("B", "unlocked; IsLocked = %v", isLocked)
}

// createOrder is instance A's handler: it locks the order, calls
// deductStock (which locks it again), says so on locked and holds the lock
// until release closes.
func createOrder(ctx context.Context, lock *relock.Lock, locked chan<- struct{}, release <-chan struct{}) {
	ctx, err := lock.Lock(ctx) // the hold's context: pass it on, unlock with it
	if err != nil {
		log.Fatal(err)
	}
	token, _ := lock.Token(ctx)
	n, _ := lock.HoldCount(ctx)
	say("A", "createOrder: locked %q (hold count %d, fencing token %d)", lock.Name(), n, token)
	if err := deductStock(ctx, lock); err != nil {
		log.Fatal(err)
	}
	close(locked)
	<-release
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	say("A", "createOrder: unlocked; the lock's context ends with %q", context.Cause(ctx))
}

// deductStock runs inside createOrder's hold and takes the lock again.
func deductStock(ctx context.Context, lock *relock.Lock) error {
	ctx, err := lock.Lock(ctx) // same owner: re-enters, no deadlock
	if err != nil {
		return err
	}
	defer lock.Unlock(ctx)
	n, _ := lock.HoldCount(ctx)
	say("A", "deductStock: re-entered the lock, hold count %d", n)
	return nil
}

// waitForTheLock is instance B while A holds the lock: TryLock without
// waiting fails, Lock waits and gets the lock as soon as A (told by closing
// release) unlocks it.
func waitForTheLock(ctx context.Context, lock *relock.Lock, release chan<- struct{}) {
	if held, err := lock.TryLock(ctx, 0, 0); err != nil {
		say("B", "TryLock without waiting: %v", err)
	} else {
		_ = lock.Unlock(held) // not expected: A holds it
	}
	got := make(chan context.Context)
	go func() {
		say("B", "Lock: waiting (asleep on the unlock channel, not polling)")
		ctx, err := lock.Lock(ctx)
		if err != nil {
			log.Fatal(err)
		}
		got <- ctx
	}()
	time.Sleep(50 * time.Millisecond) // let B start waiting, so the demo shows the hand-off
	close(release)
	held := <-got
	token, _ := lock.Token(held)
	say("B", "Lock: got it right after A's unlock (fencing token %d)", token)
	ttl, _ := lock.TTL(held)
	say("B", "lease left %v, renewed by the watchdog while held", ttl.Round(time.Second))
	if err := lock.Unlock(held); err != nil {
		log.Fatal(err)
	}
}

// redisOptions uses REDIS_URL when set, otherwise an embedded miniredis.
func redisOptions() (*redis.Options, string) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			// Not err: it quotes the URL, password and all.
			log.Fatal("REDIS_URL is not a valid redis:// URL (it is not shown: it may hold a password)")
		}
		return opts, opts.Addr
	}
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	return &redis.Options{Addr: m.Addr()}, "an embedded miniredis (set REDIS_URL to use your Redis)"
}
