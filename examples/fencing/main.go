// Command fencing shows why a lock is not enough to protect a resource, and
// how fencing tokens are: holder A is paused (a GC pause, a stopped VM) past
// its lease, B takes the lock and writes, and when A wakes up and writes,
// unaware, the storage rejects A's write by its older token.
//
//	go run ./examples/fencing                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/fencing
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/relock-go/relock/examples/internal/exampleredis"
)

// storage is the resource the lock protects. It remembers the largest
// fencing token it has seen and refuses writes that carry a smaller one.
type storage struct {
	mu    sync.Mutex
	token int64
	value string
}

func (s *storage) Write(token int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.token {
		return fmt.Errorf("rejected: stale token %d, %d was already used", token, s.token)
	}
	s.token, s.value = token, value
	return nil
}

const lease = 500 * time.Millisecond

func main() {
	srv := exampleredis.Open()
	defer srv.Close()
	story := exampleredis.NewStory("relock fencing on " + srv.Where)
	store := &storage{}
	ctx := context.Background()

	// Two processes; A takes the lock with a lease, so nothing renews it.
	lockA := srv.Relock().Lock("invoice:42")
	lockB := srv.Relock().Lock("invoice:42")
	heldA, err := lockA.TryLock(ctx, 0, lease)
	check(err)
	tokenA, _ := lockA.Token(heldA)
	story.Say("A", "locked %q with a %v lease, fencing token %d", lockA.Name(), lease, tokenA)

	story.Say("A", "paused for %v (GC, a stopped VM): its lease runs out", lease+300*time.Millisecond)
	srv.Elapse(lease + 300*time.Millisecond)

	heldB, err := lockB.TryLock(ctx, time.Second, 0)
	check(err)
	tokenB, _ := lockB.Token(heldB)
	story.Say("B", "locked %q, fencing token %d", lockB.Name(), tokenB)
	story.Say("B", "writes with token %d: %s", tokenB, result(store.Write(tokenB, "from B")))
	check(lockB.Unlock(heldB))

	story.Say("A", "wakes up and writes with token %d: %s", tokenA, result(store.Write(tokenA, "from A")))
	story.Say("A", "(its lock's context had ended with %q; checking it first still races the pause)", context.Cause(heldA))
	story.Say("storage", "holds %q", store.value)
}

func result(err error) string {
	if err != nil {
		return err.Error()
	}
	return "accepted"
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
