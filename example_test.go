package relock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// exampleRedis returns a client of an embedded miniredis, so that examples
// run anywhere; use your own *redis.Client, *redis.ClusterClient or failover
// client in real code.
func exampleRedis() (*redis.Client, func()) {
	rdb, _, done := exampleMiniredis()
	return rdb, done
}

func exampleMiniredis() (*redis.Client, *miniredis.Miniredis, func()) {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return rdb, m, func() { _ = rdb.Close(); m.Close() }
}

func Example() {
	rdb, done := exampleRedis()
	defer done()

	c := relock.New(rdb) // one per process
	defer c.Close()
	orders := c.Lock("orders") // cheap; share it between goroutines

	deductStock := func(ctx context.Context) error {
		ctx, err := orders.Lock(ctx) // the same owner: re-enters
		if err != nil {
			return err
		}
		defer orders.Unlock(ctx)
		n, _ := orders.HoldCount(ctx)
		fmt.Println("deductStock holds it", n, "times")
		return nil
	}
	createOrder := func(ctx context.Context) error {
		ctx, err := orders.Lock(ctx) // blocks until acquired or ctx ends
		if err != nil {
			return err
		}
		defer orders.Unlock(ctx)
		fmt.Println("createOrder holds it")
		return deductStock(ctx)
	}

	if err := createOrder(context.Background()); err != nil {
		fmt.Println(err)
	}
	locked, _ := orders.IsLocked(context.Background())
	fmt.Println("locked afterwards:", locked)
	// Output:
	// createOrder holds it
	// deductStock holds it 2 times
	// locked afterwards: false
}

func ExampleLock_TryLock() {
	rdb, done := exampleRedis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()
	l := c.Lock("report")

	held, _ := l.Lock(context.Background())

	// Another owner: wait at most 10ms, and hold for at most 5s if it gets in.
	_, err := l.TryLock(context.Background(), 10*time.Millisecond, 5*time.Second)
	fmt.Println(errors.Is(err, relock.ErrNotObtained))

	_ = l.Unlock(held)
	ctx, err := l.TryLock(context.Background(), 10*time.Millisecond, 5*time.Second)
	fmt.Println(err)
	ttl, _ := l.TTL(ctx)
	fmt.Println(ttl > 4*time.Second && ttl <= 5*time.Second)
	_ = l.Unlock(ctx)
	// Output:
	// true
	// <nil>
	// true
}

func ExampleLock_Unlock() {
	rdb, done := exampleRedis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()
	l := c.Lock("job")

	ctx, _ := l.Lock(context.Background())
	fmt.Println(l.Unlock(ctx))
	// The hold's context ends when it is released.
	fmt.Println(context.Cause(ctx))
	// One Unlock more than Locks is an error, and changes nothing.
	fmt.Println(errors.Is(l.Unlock(ctx), relock.ErrNotHeld))
	// Output:
	// <nil>
	// relock: lock released
	// true
}

// The context a Lock returns tells the holder when the lock is gone: stop
// working on the protected resource when it is done.
func ExampleLock_Lock_lost() {
	rdb, done := exampleRedis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()
	l := c.Lock("batch")

	ctx, _ := l.Lock(context.Background())
	_, _ = l.ForceUnlock(context.Background()) // an operator frees it

	<-ctx.Done()
	fmt.Println(errors.Is(context.Cause(ctx), relock.ErrLockLost))
	fmt.Println(errors.Is(l.Unlock(ctx), relock.ErrLockLost))
	// Output:
	// true
	// true
}

// A fencing token lets the protected storage refuse a holder that lost its
// lock without noticing (a pause longer than its lease).
func ExampleLock_Token() {
	rdb, mini, done := exampleMiniredis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()
	l := c.Lock("ledger")

	var storageToken int64 // the storage keeps the greatest token it has seen
	write := func(token int64) error {
		if token < storageToken {
			return errors.New("stale token: a newer one was already used")
		}
		storageToken = token
		return nil
	}

	first, _ := l.TryLock(context.Background(), 0, 50*time.Millisecond)
	t1, _ := l.Token(first)
	<-first.Done()                          // its lease ran out while it was "paused"
	mini.FastForward(50 * time.Millisecond) // miniredis' clock only moves when told

	second, _ := l.Lock(context.Background())
	t2, _ := l.Token(second)
	fmt.Println(write(t2))
	fmt.Println(write(t1)) // the first holder wakes up and tries to write
	_ = l.Unlock(second)
	// Output:
	// <nil>
	// stale token: a newer one was already used
}

// The scoped form: Do locks, runs the function with the hold context and
// always unlocks, so a hold can neither leak nor be released with the wrong
// context.
func ExampleLock_Do() {
	rdb, stop := exampleRedis()
	defer stop()
	c := relock.New(rdb)
	defer c.Close()

	orders := c.Lock("orders")
	err := orders.Do(context.Background(), func(ctx context.Context) error {
		n, _ := orders.HoldCount(ctx)
		fmt.Println("inside, holds:", n)
		return nil
	})
	fmt.Println("err:", err)
	locked, _ := orders.IsLocked(context.Background())
	fmt.Println("locked after Do:", locked)
	// Output:
	// inside, holds: 1
	// err: <nil>
	// locked after Do: false
}

// NewOwner gives goroutines forked from a hold context owners of their own,
// so that they exclude each other.
func ExampleNewOwner() {
	rdb, stop := exampleRedis()
	defer stop()
	c := relock.New(rdb)
	defer c.Close()

	job := c.Lock("job")
	item := c.Lock("item")
	hold, _ := job.Lock(context.Background())
	defer job.Unlock(hold)

	var wg sync.WaitGroup
	var mu sync.Mutex
	inside, most := 0, 0
	for range 3 {
		wg.Go(func() {
			_ = item.Do(relock.NewOwner(hold), func(context.Context) error {
				mu.Lock()
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				return nil
			})
		})
	}
	wg.Wait()
	fmt.Println("at most inside at once:", most)
	// Output:
	// at most inside at once: 1
}
