package relock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock"
)

// Readers share the lock; a writer has it alone.
func ExampleRWLock() {
	rdb, done := exampleRedis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()

	prices := c.RWLock("prices")
	bg := context.Background()
	r1, _ := prices.ReadLock().Lock(bg)
	r2, _ := prices.ReadLock().Lock(bg) // another owner reads at the same time
	_, err := prices.WriteLock().TryLock(bg, 0, 0)
	fmt.Println("writer while reading:", errors.Is(err, relock.ErrNotObtained))
	_ = prices.ReadLock().Unlock(r1)
	_ = prices.ReadLock().Unlock(r2)

	w, _ := prices.WriteLock().Lock(bg)
	token, _ := prices.WriteLock().Token(w) // pass it to the storage with each write
	fmt.Println("writing with a fencing token:", token > 0)
	_ = prices.WriteLock().Unlock(w)
	// Output:
	// writer while reading: true
	// writing with a fencing token: true
}

// The writer may read and then stop writing (downgrade); a reader asking
// for the write lock gets ErrUpgrade instead of a deadlock.
func ExampleRWLock_downgrade() {
	rdb, done := exampleRedis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()

	cache := c.RWLock("cache")
	w, _ := cache.WriteLock().Lock(context.Background())
	// WithoutCancel keeps the owner but not w's end: the read hold outlives
	// the write hold.
	r, _ := cache.ReadLock().Lock(context.WithoutCancel(w))
	_ = cache.WriteLock().Unlock(w)
	reads, _ := cache.ReadLock().HoldCount(r)
	fmt.Println("still reading:", reads > 0)

	_, err := cache.WriteLock().Lock(r)
	fmt.Println(errors.Is(err, relock.ErrUpgrade))
	_ = cache.ReadLock().Unlock(r)
	// Output:
	// still reading: true
	// true
}
