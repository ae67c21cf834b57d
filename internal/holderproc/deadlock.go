package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// runDeadlock is -kind deadlock: for runFor, one owner takes two of the
// comma-separated names at random, in a random order, holding the first
// while it waits for the second (at most 10 s), so that processes deadlock.
// Each hold sets a guard key with SET NX, so two holders of one name at
// once are seen. It prints one line, "result ops=… deadlocks=…
// maxbreak=<ms> timeouts=… overlaps=… errors=…": maxbreak is the longest
// wait that ended with ErrDeadlock.
func runDeadlock(cfg *config) error {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.addr})
	c := relock.New(rdb, relock.WithWatchdogLease(cfg.lease))
	defer func() { _ = c.Close() }()
	names := strings.Split(cfg.name, ",")
	var ops, deadlocks, timeouts, overlaps, fails int
	var maxBreak time.Duration
	ctx := context.Background()
	guard := func(name string) {
		if ok, err := rdb.SetNX(ctx, "dlguard:"+name, "1", 20*time.Second).Result(); err != nil || !ok {
			overlaps++
		}
	}
	unguard := func(name string) { rdb.Del(ctx, "dlguard:"+name) }
	for end := time.Now().Add(cfg.w.runFor); time.Now().Before(end); {
		p := rand.Perm(len(names))
		first, second := c.Lock(names[p[0]]), c.Lock(names[p[1]])
		h1, err := first.TryLock(relock.NewOwner(ctx), 10*time.Second, 0)
		if err != nil {
			timeouts++
			continue
		}
		guard(first.Name())
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		start := time.Now()
		h2, err := second.TryLock(h1, 10*time.Second, 0)
		switch {
		case errors.Is(err, relock.ErrDeadlock):
			deadlocks++
			maxBreak = max(maxBreak, time.Since(start))
		case errors.Is(err, relock.ErrNotObtained):
			timeouts++
		case err != nil:
			fails++
		default:
			guard(second.Name())
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			unguard(second.Name())
			if second.Unlock(h2) != nil {
				fails++
			}
			ops++
		}
		unguard(first.Name())
		if first.Unlock(h1) != nil {
			fails++
		}
	}
	fmt.Printf("result ops=%d deadlocks=%d maxbreak=%d timeouts=%d overlaps=%d errors=%d\n",
		ops, deadlocks, maxBreak.Milliseconds(), timeouts, overlaps, fails)
	return nil
}
