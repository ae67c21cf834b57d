package relock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// memoryCycle takes and gives back one kind once, on the lock called name.
type memoryCycle struct {
	kind string
	run  func(ctx context.Context, c *relock.Client, name string) error
}

// cycleLocker is what a memoryCycle of a lock kind calls.
type cycleLocker interface {
	Lock(ctx context.Context) (context.Context, error)
	Unlock(ctx context.Context) error
}

// exclusiveCycle is a memoryCycle of a kind that locks and unlocks.
func exclusiveCycle(kind string, open func(c *relock.Client, name string) cycleLocker) memoryCycle {
	return memoryCycle{kind, func(ctx context.Context, c *relock.Client, name string) error {
		l := open(c, name)
		h, err := l.Lock(ctx)
		if err != nil {
			return err
		}
		return l.Unlock(h)
	}}
}

var memoryCycles = []memoryCycle{
	exclusiveCycle("Lock", func(c *relock.Client, n string) cycleLocker { return c.Lock(n) }),
	exclusiveCycle("FairLock", func(c *relock.Client, n string) cycleLocker { return c.FairLock(n) }),
	exclusiveCycle("WriteLock", func(c *relock.Client, n string) cycleLocker { return c.RWLock(n).WriteLock() }),
	exclusiveCycle("ReadLock", func(c *relock.Client, n string) cycleLocker { return c.RWLock(n).ReadLock() }),
	exclusiveCycle("SpinLock", func(c *relock.Client, n string) cycleLocker { return c.SpinLock(n) }),
	exclusiveCycle("MultiLock (2 parts)", func(c *relock.Client, n string) cycleLocker {
		return relock.NewMultiLock(c.Lock(n), c.Lock(n+"-b"))
	}),
	exclusiveCycle("RedLock (1 master)", func(c *relock.Client, n string) cycleLocker {
		return relock.NewRedLock(n, []*relock.Client{c})
	}),
	{"Semaphore (1 of 4 permits)", func(ctx context.Context, c *relock.Client, name string) error {
		s := c.Semaphore(name, 4)
		h, err := s.Acquire(ctx, 1)
		if err != nil {
			return err
		}
		return s.Release(h)
	}},
	{"CountDownLatch (count 1)", func(ctx context.Context, c *relock.Client, name string) error {
		l := c.CountDownLatch(name)
		if _, err := l.TrySetCount(ctx, 1); err != nil {
			return err
		}
		return l.CountDown(ctx)
	}},
}

// BenchmarkRedisMemoryPerName runs every kind at 1, 10 and 100 releases/s,
// each on a name of its own, for the unlock latch's 30 s and a little
// more, then logs the Redis memory each name keeps (MEMORY USAGE of every
// key of its hash tag, free after its last release); then the memory a held
// Lock costs, as used_memory over 10,000 held Locks. It takes about 40 s:
//
//	go test -run '^$' -bench BenchmarkRedisMemoryPerName -benchtime 1x -v .
func BenchmarkRedisMemoryPerName(b *testing.B) {
	for b.Loop() {
		srv := redistest.Start(b)
		rdb := srv.Client()
		c := relock.New(rdb)
		ctx := context.Background()
		rates := []int{1, 10, 100}
		run := defaultUnlockLatch + 2*time.Second
		var wg sync.WaitGroup
		for i, k := range memoryCycles {
			for _, rate := range rates {
				name := fmt.Sprintf("mem%d-%d", i, rate)
				wg.Go(func() {
					tick := time.NewTicker(time.Second / time.Duration(rate))
					defer tick.Stop()
					for end := time.Now().Add(run); time.Now().Before(end); <-tick.C {
						if err := k.run(ctx, c, name); err != nil {
							// A cycle cut short by a slow machine leaves no
							// more than a hold to its lease: the memory is
							// measured all the same.
							b.Logf("%s: %v", k.kind, err)
						}
					}
				})
			}
		}
		wg.Wait()
		table := "\n| kind | 1 release/s | 10 releases/s | 100 releases/s |\n|---|---|---|---|\n"
		for i, k := range memoryCycles {
			table += "| " + k.kind + " |"
			for _, rate := range rates {
				table += fmt.Sprintf(" %d B |", tagMemory(b, rdb, fmt.Sprintf("mem%d-%d", i, rate)))
			}
			table += "\n"
		}
		table += fmt.Sprintf("a held Lock: %.0f B of used_memory each, over 10,000 holds", heldLockUsedMemory(b, c, rdb, 10000))
		b.Log(table)
		_ = c.Close()
	}
}

// tagMemory sums MEMORY USAGE of every key of name (its hash tag "{name}",
// and a MultiLock's second part "{name-b}").
func tagMemory(t testing.TB, rdb *redis.Client, name string) int64 {
	ctx := context.Background()
	var sum int64
	for _, k := range allKeys(t, rdb) {
		if strings.Contains(k, "{"+name+"}") || strings.Contains(k, "{"+name+"-b}") {
			n, err := rdb.MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			sum += n
		}
	}
	return sum
}

// heldLockUsedMemory takes n Locks of names of their own on c (the
// watchdog's lease) and returns the growth of Redis's used_memory per hold,
// then unlocks them.
func heldLockUsedMemory(t testing.TB, c *relock.Client, rdb *redis.Client, n int) float64 {
	ctx := context.Background()
	locks := make([]*relock.Lock, n)
	holds := make([]context.Context, n)
	for i := range locks {
		locks[i] = c.Lock("held-" + strconv.Itoa(i))
	}
	before := usedMemoryBytes(t, rdb)
	for i, l := range locks {
		h, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = h
	}
	after := usedMemoryBytes(t, rdb)
	for i, l := range locks {
		if err := l.Unlock(holds[i]); err != nil {
			t.Fatal(err)
		}
	}
	return float64(after-before) / float64(n)
}

// usedMemoryBytes is INFO memory's used_memory.
func usedMemoryBytes(t testing.TB, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}
