package relock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Many Clients' goroutines on a semaphore of 3, one of whose permits comes
// back by expiry (a leased hold nobody releases): several waiters then
// find free permits at their own attempts, the head of the queue serving
// itself and those behind it. Never more than 3 are inside. (The walk of
// the queue once went on after serving the caller without counting its
// permits, and granted a fourth.)
func TestSemaphoreNeverOverCapacity(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		for round := range 4 {
			name := fmt.Sprintf("cap3:%d", round)
			var running, peak atomic.Int32
			var wg sync.WaitGroup
			_, err := b.newClient(t).Semaphore(name, 3).TryAcquire(context.Background(), 1, 0, 50*time.Millisecond)
			require.NoError(t, err)
			for range 6 {
				s := b.newClient(t).Semaphore(name, 3)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 6 {
						err := s.Do(context.Background(), 1, func(context.Context) error {
							n := running.Add(1)
							for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
							}
							time.Sleep(10 * time.Millisecond)
							running.Add(-1)
							return nil
						})
						assert.NoError(t, err)
					}
				}()
			}
			wg.Wait()
			assert.LessOrEqual(t, peak.Load(), int32(3), "round %d", round)
		}
	})
}
