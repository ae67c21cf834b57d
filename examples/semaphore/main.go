// Command semaphore shows relock's Semaphore as a pool of 3 workers shared
// by several processes: 5 processes (5 Clients, each on its own
// connection) run 3 jobs each, and never more than 3 jobs run at once
// anywhere. One process "crashes" holding a permit: the permit comes back
// when its lease ends. A CountDownLatch tells the coordinator when every
// process is done.
//
//	go run ./examples/semaphore                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/semaphore
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/examples/internal/exampleredis"
)

const (
	workers   = 3 // the pool: permits of the semaphore
	processes = 5
	jobs      = 3 // per process
)

func main() {
	srv := exampleredis.Open()
	defer srv.Close()
	story := exampleredis.NewStory("relock semaphore on " + srv.Where)
	ctx := context.Background()

	coordinator := srv.Relock()
	done := coordinator.CountDownLatch("jobs-done")
	if _, err := done.TrySetCount(ctx, processes); err != nil {
		log.Fatal(err)
	}

	// A process that crashes while it holds a permit (here: it took it with
	// a 400ms lease and never gives it back; a real crash stops the
	// watchdog, and the permit comes back within the watchdog lease). The
	// lease counts from before the request: a reply later than the lease
	// is refused, and a new process's first request also loads the script.
	crashed := srv.Relock()
	if _, err := crashed.Semaphore("pool", workers).TryAcquire(ctx, 1, 0, 400*time.Millisecond); err != nil {
		log.Fatal(err)
	}
	story.Say("crashed", "took 1 permit and died without releasing it")

	var g gauge
	var wg sync.WaitGroup
	for p := range processes {
		c := srv.Relock() // a process of its own
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("P%d", p+1)
			pool := c.Semaphore("pool", workers)
			for range jobs {
				err := pool.Do(ctx, 1, func(ctx context.Context) error {
					if g.enter() == workers {
						story.Say(name, "%d jobs at once: the dead process's permit came back", workers)
					}
					time.Sleep(80 * time.Millisecond) // the job
					g.running.Add(-1)
					return nil
				})
				if err != nil {
					log.Fatal(err)
				}
			}
			story.Say(name, "ran its %d jobs", jobs)
			if err := c.CountDownLatch("jobs-done").CountDown(ctx); err != nil {
				log.Fatal(err)
			}
		}()
	}
	if err := done.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	story.Say("coordinator", "the latch opened: all %d processes done", processes)
	wg.Wait()
	free, err := coordinator.Semaphore("pool", workers).Available(ctx)
	if err != nil {
		log.Fatal(err)
	}
	story.Say("coordinator", "%d jobs ran, at most %d at once; %d of %d permits free again", processes*jobs, g.peak.Load(), free, workers)
}

// gauge counts the jobs running across the processes.
type gauge struct{ running, peak atomic.Int32 }

// enter counts one more job running and returns the new peak when this job
// raised it (0 otherwise).
func (g *gauge) enter() int32 {
	n := g.running.Add(1)
	for {
		old := g.peak.Load()
		if n <= old {
			return 0
		}
		if g.peak.CompareAndSwap(old, n) {
			return n
		}
	}
}
