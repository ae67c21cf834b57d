// Command deadlock shows relock breaking a deadlock between two processes
// (two Clients, each on its own connection) that take the same two locks in
// opposite orders: A locks "account:alice" then "account:bob", B locks
// "account:bob" then "account:alice". Each waits for the other. After the
// detection delay (1 s by default) relock finds the cycle in Redis and
// tells exactly one of them — the one whose wait began last — ErrDeadlock.
// That one lets go of what it holds and tries again; the other proceeds.
//
//	go run ./examples/deadlock                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/deadlock
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
	story := exampleredis.NewStory("relock deadlock on " + srv.Where)

	var both sync.WaitGroup // both hold their first lock
	both.Add(2)
	var wg sync.WaitGroup
	for _, p := range []struct{ name, first, second string }{
		{"A", "account:alice", "account:bob"},
		{"B", "account:bob", "account:alice"},
	} {
		c := srv.Relock() // a process of its own; detection is on by default
		wg.Go(func() { transfer(c, story, &both, p.name, p.first, p.second) })
	}
	wg.Wait()
	story.Say("", "both transfers done; nothing left locked")
}

// transfer locks first, then second, retrying the whole transfer when it
// is the victim of a deadlock.
func transfer(c *relock.Client, story *exampleredis.Story, both *sync.WaitGroup, name, first, second string) {
	for try := 1; ; try++ {
		ctx := context.Background()
		h1, err := c.Lock(first).Lock(ctx)
		if err != nil {
			log.Fatal(err)
		}
		story.Say(name, "locked %q, now wants %q", first, second)
		if try == 1 {
			both.Done()
			both.Wait() // the deadlock, for sure: each holds what the other wants
		}
		start := time.Now()
		h2, err := c.Lock(second).Lock(h1)
		if errors.Is(err, relock.ErrDeadlock) {
			story.Say(name, "told after %v: ErrDeadlock (and ErrNotObtained: %v)", time.Since(start).Round(100*time.Millisecond), errors.Is(err, relock.ErrNotObtained))
			story.Say(name, "releases %q and will try again", first)
			if err := c.Lock(first).Unlock(h1); err != nil {
				log.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // let the other finish its transfer first
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		story.Say(name, "locked %q too: transfers, then unlocks both", second)
		if err := c.Lock(second).Unlock(h2); err != nil {
			log.Fatal(err)
		}
		if err := c.Lock(first).Unlock(h1); err != nil {
			log.Fatal(err)
		}
		return
	}
}
