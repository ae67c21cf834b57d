// Command multilock shows relock's MultiLock: two tellers move money between
// the same two accounts in opposite directions, each transfer locking both
// accounts at once. MultiLock takes its locks in one fixed order and never
// keeps one while it waits for another, so they cannot deadlock; and it takes
// all of them or none.
//
//	go run ./examples/multilock                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/multilock
package main

import (
	"context"
	"errors"
	"log"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/examples/internal/exampleredis"
)

const transfers = 20

func balance(name string) string { return "relock-example:balance:" + name }

func main() {
	srv := exampleredis.Open()
	defer srv.Close()
	story := exampleredis.NewStory("relock multilock on " + srv.Where)

	// The balances live in Redis too; the locks make each transfer's
	// read-check-write safe.
	rdb := redis.NewClient(srv.Options)
	defer rdb.Close()
	ctx := context.Background()
	check(rdb.MSet(ctx, balance("alice"), 100, balance("bob"), 100).Err())
	twoTellers(ctx, story, srv, rdb)
	allOrNothing(ctx, story, srv.Relock())
	check(rdb.Del(ctx, balance("alice"), balance("bob")).Err())
}

// twoTellers moves money both ways at once: each transfer locks both
// accounts with one MultiLock, in whatever order it names them, and no
// teller deadlocks the other.
func twoTellers(ctx context.Context, story *exampleredis.Story, srv *exampleredis.Server, rdb *redis.Client) {
	story.Say("tellers", "teller 1 moves 5 from alice to bob, teller 2 from bob to alice, %d times each", transfers)
	start := time.Now()
	var wg sync.WaitGroup
	for _, t := range [][2]string{{"alice", "bob"}, {"bob", "alice"}} {
		c := srv.Relock() // each teller in its own process
		wg.Go(func() {
			for range transfers {
				check(transfer(ctx, c, rdb, t[0], t[1]))
			}
		})
	}
	wg.Wait()
	a, _ := rdb.Get(ctx, balance("alice")).Int()
	b, _ := rdb.Get(ctx, balance("bob")).Int()
	story.Say("tellers", "%d transfers in %v, no deadlock: alice %d, bob %d, total %d",
		2*transfers, time.Since(start).Round(time.Millisecond), a, b, a+b)
}

// transfer moves 5 from one account to the other, if it has them, holding
// both accounts' locks.
func transfer(ctx context.Context, c *relock.Client, rdb *redis.Client, from, to string) error {
	m := relock.NewMultiLock(c.Lock("account:"+from), c.Lock("account:"+to))
	held, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	a, err := rdb.Get(held, balance(from)).Int()
	if err != nil {
		return err
	}
	if a >= 5 {
		b, err := rdb.Get(held, balance(to)).Int()
		if err != nil {
			return err
		}
		if err := rdb.MSet(held, balance(from), a-5, balance(to), b+5).Err(); err != nil {
			return err
		}
	}
	return m.Unlock(held)
}

// allOrNothing: while an auditor holds bob, a single attempt at
// {bob, carol} gets neither.
func allOrNothing(ctx context.Context, story *exampleredis.Story, c *relock.Client) {
	audit, err := c.Lock("account:bob").Lock(ctx)
	check(err)
	story.Say("auditor", "holds bob's account")
	both := relock.NewMultiLock(c.Lock("account:bob"), c.Lock("account:carol"))
	held, err := both.TryLock(ctx, 0, 0)
	if err == nil {
		check(both.Unlock(held)) // not expected: the auditor holds bob
	}
	carol, _ := c.Lock("account:carol").IsLocked(ctx)
	story.Say("teller 3", "TryLock {bob, carol}: not obtained = %v, carol locked = %v (all or nothing)",
		errors.Is(err, relock.ErrNotObtained), carol)
	check(c.Lock("account:bob").Unlock(audit))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
