package relock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock"
)

// A FairLock hands the lock out in the order it was asked for, across
// processes; the holder re-enters with its context.
func ExampleFairLock() {
	rdb, done := exampleRedis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()

	tickets := c.FairLock("tickets")
	ctx, err := tickets.Lock(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	inner, _ := tickets.Lock(ctx) // same owner: re-enters
	n, _ := tickets.HoldCount(inner)
	token, _ := tickets.Token(ctx)
	innerToken, _ := tickets.Token(inner)
	fmt.Println("holds:", n, "same token:", token == innerToken)
	_ = tickets.Unlock(inner)
	_ = tickets.Unlock(ctx)

	locked, _ := tickets.IsLocked(context.Background())
	fmt.Println("locked:", locked)
	// Output:
	// holds: 2 same token: true
	// locked: false
}

// A waiter that gives up leaves the queue at once instead of holding up the
// ones behind it.
func ExampleFairLock_TryLock() {
	rdb, done := exampleRedis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()

	l := c.FairLock("report")
	holder, _ := l.Lock(context.Background())
	_, err := l.TryLock(context.Background(), 10*time.Millisecond, 0)
	fmt.Println(err)
	fmt.Println("queue left:", rdb.Exists(context.Background(), l.QueueKey()).Val())
	_ = l.Unlock(holder)
	// Output:
	// relock: lock not obtained
	// queue left: 0
}
