package relock_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The keys a lock leaves do not grow with its release rate: at most 3 per
// lock name (a FairLock's hash, queue and tail) while it is used at full
// speed, contended, and only the tail once it is free, whatever the number
// of releases. Redis's memory after the run is logged.
func TestKeysPerLockNameStayBounded(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	const (
		names      = 2 // per kind
		goroutines = 4 // per name
		cycles     = 150
	)
	var wg sync.WaitGroup
	for _, k := range exclusiveKinds {
		for n := range names {
			l := k.open(c, fmt.Sprintf("%s-%d", k.name, n))
			for range goroutines {
				wg.Go(func() {
					for range cycles {
						ctx, err := l.Lock(context.Background())
						if !assert.NoError(t, err) {
							return
						}
						assert.NoError(t, l.Unlock(ctx))
					}
				})
			}
		}
	}
	stop, sampled := make(chan struct{}), make(chan int)
	go func() {
		most := 0
		for {
			most = max(most, maxKeysPerName(t, rdb))
			select {
			case <-stop:
				sampled <- most
				return
			default:
			}
		}
	}()
	wg.Wait()
	close(stop)
	most := <-sampled
	releases := len(exclusiveKinds) * names * goroutines * cycles
	assert.LessOrEqual(t, most, 3, "keys per lock name during %d releases", releases)
	assert.Equal(t, 1, maxKeysPerName(t, rdb), "only the tail is left of a free lock")
	assert.Len(t, allKeys(t, rdb), len(exclusiveKinds)*names, "one tail per lock")
	requireOnlyExpiringLeftovers(t, rdb)
	info, err := rdb.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	t.Logf("%d releases: at most %d keys per lock name; %s", releases, most, usedMemory(info))
}

var tagOf = regexp.MustCompile(`\{[^}]*\}`)

// maxKeysPerName counts the keys of each lock name (its hash tag) and
// returns the largest count.
func maxKeysPerName(t testing.TB, rdb redis.UniversalClient) int {
	per := map[string]int{}
	most := 0
	for _, k := range allKeys(t, rdb) {
		tag := tagOf.FindString(k)
		per[tag]++
		most = max(most, per[tag])
	}
	return most
}

// usedMemory picks used_memory_human out of INFO memory.
func usedMemory(info string) string {
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "used_memory_human:") {
			return strings.TrimSpace(line)
		}
	}
	return "used_memory_human: not reported"
}
