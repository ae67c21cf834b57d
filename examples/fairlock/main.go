// Command fairlock shows relock's FairLock: three services ask for a busy
// lock one after the other and get it in the order they asked, first come,
// first served.
//
//	go run ./examples/fairlock                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/fairlock
package main

import (
	"context"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/relock-go/relock/examples/internal/exampleredis"
)

func main() {
	srv := exampleredis.Open()
	defer srv.Close()
	story := exampleredis.NewStory("relock fairlock on " + srv.Where)

	ctx := context.Background()
	holder := srv.Relock().FairLock("printer") // one Client per service, as in its own process
	held, err := holder.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	story.Say("A", "locked %q", holder.Name())

	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	for i, who := range []string{"B", "C", "D"} {
		lock := srv.Relock().FairLock("printer")
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, err := lock.Lock(ctx) // queues in Redis, sleeps until its turn
			if err != nil {
				log.Fatal(err)
			}
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			story.Say(who, "got the lock, prints for 20ms")
			time.Sleep(20 * time.Millisecond)
			if err := lock.Unlock(ctx); err != nil {
				log.Fatal(err)
			}
		}()
		story.Say(who, "asks for it: waits in the queue, position %d", i+1)
		time.Sleep(50 * time.Millisecond) // B asks first, then C, then D
	}

	story.Say("A", "unlocks: only the first in the queue is woken")
	if err := holder.Unlock(held); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	story.Say("", "grant order: %s, the order they asked in", strings.Join(order, " "))
}
