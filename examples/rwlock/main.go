// Command rwlock shows relock's RWLock on a price list: readers share it, a
// writer has it alone, and once a writer waits new readers queue behind it
// (writers first), so a stream of readers cannot starve it.
//
//	go run ./examples/rwlock                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/rwlock
package main

import (
	"context"
	"errors"
	"log"
	"sync"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/examples/internal/exampleredis"
)

func main() {
	srv := exampleredis.Open()
	defer srv.Close()
	story := exampleredis.NewStory("relock rwlock on " + srv.Where)

	prices := srv.Relock().RWLock("prices")
	ctx := context.Background()

	r1, err := prices.ReadLock().Lock(ctx)
	check(err)
	story.Say("R1", "reading the prices")
	r2, err := prices.ReadLock().Lock(ctx) // another owner: readers share
	check(err)
	story.Say("R2", "reading too: readers share the lock")

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		w, err := prices.WriteLock().Lock(ctx)
		check(err)
		token, _ := prices.WriteLock().Token(w)
		story.Say("W", "writing new prices (fencing token %d)", token)
		time.Sleep(20 * time.Millisecond)
		story.Say("W", "done writing")
		check(prices.WriteLock().Unlock(w))
	}()
	story.Say("W", "wants to write: waits for the readers")
	writerQueued(ctx, srv.Relock()) // new readers now wait behind it

	go func() {
		defer wg.Done()
		r3, err := prices.ReadLock().Lock(ctx)
		check(err)
		story.Say("R3", "reading the new prices")
		w3, err := prices.WriteLock().Lock(r3)
		if errors.Is(err, relock.ErrUpgrade) {
			story.Say("R3", "asks for the write lock while reading: ErrUpgrade, not a deadlock")
		}
		if err == nil {
			check(prices.WriteLock().Unlock(w3)) // not expected: a reader cannot upgrade
		}
		check(prices.ReadLock().Unlock(r3))
	}()
	story.Say("R3", "wants to read: a writer waits, so it queues behind the writer")
	time.Sleep(100 * time.Millisecond) // let it start waiting

	story.Say("R1", "done reading")
	check(prices.ReadLock().Unlock(r1))
	time.Sleep(20 * time.Millisecond)
	story.Say("R2", "done reading: the last reader out wakes the writer")
	check(prices.ReadLock().Unlock(r2))
	wg.Wait()
}

// writerQueued returns once the writer's claim is in Redis (Inspect shows it
// waiting), so that a reader that comes next queues behind it.
func writerQueued(ctx context.Context, c *relock.Client) {
	for {
		st, err := c.Inspect(ctx, "prices")
		check(err)
		if st.RWLock != nil && len(st.RWLock.WritersWaiting) > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
