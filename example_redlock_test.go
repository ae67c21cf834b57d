package relock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// A RedLock over three independent masters is held once two of them granted
// it.
func ExampleRedLock() {
	var clients []*relock.Client
	for range 3 {
		rdb, done := exampleRedis()
		defer done()
		c := relock.New(rdb)
		defer c.Close()
		clients = append(clients, c)
	}
	r := relock.NewRedLock("report", clients)

	ctx, err := r.Lock(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Unlock(ctx)
	validity, _ := r.Validity(ctx)
	token, _ := r.Token(ctx)
	fmt.Println("quorum:", r.Quorum())
	fmt.Println("valid for more than 29s:", validity > 29*time.Second)
	fmt.Println("fencing token:", token > 0)
	// Output:
	// quorum: 2
	// valid for more than 29s: true
	// fencing token: true
}

var errStaleToken = errors.New("stale token: a newer one was already used")

// storage is the resource the lock protects. It remembers the largest
// fencing token it has seen and refuses writes that carry a smaller one: a
// holder whose lock expired while it was paused can no longer do harm.
type storage struct {
	mu    sync.Mutex
	token int64
	value string
}

func (s *storage) Write(token int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.token {
		return errStaleToken
	}
	s.token, s.value = token, value
	return nil
}

// Fencing: client A's lease runs out while it is paused (a GC pause, a
// stopped VM); B takes the lock and writes. When A wakes up and writes, the
// storage rejects it by its smaller token. The same works with Lock.Token.
func ExampleRedLock_Token() {
	var masters []*miniredis.Miniredis
	var clients []*relock.Client
	for range 3 {
		srv, _ := miniredis.Run()
		defer srv.Close()
		masters = append(masters, srv)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer rdb.Close()
		c := relock.New(rdb)
		defer c.Close()
		clients = append(clients, c)
	}
	r := relock.NewRedLock("invoice:42", clients)
	store := &storage{}
	ctx := context.Background()

	ctxA, _ := r.TryLock(ctx, 0, time.Second)
	tokenA, _ := r.Token(ctxA)

	// A is paused; meanwhile its lease runs out on every master.
	for _, m := range masters {
		m.FastForward(2 * time.Second)
	}

	ctxB, err := r.TryLock(ctx, 0, time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	tokenB, _ := r.Token(ctxB)
	fmt.Println("B writes ->", store.Write(tokenB, "from B"))
	_ = r.Unlock(ctxB)

	// A wakes up, unaware, and writes.
	fmt.Println("A's token is older:", tokenA < tokenB)
	fmt.Println("A writes ->", store.Write(tokenA, "from A"))
	fmt.Println("stored:", store.value)
	// Output:
	// B writes -> <nil>
	// A's token is older: true
	// A writes -> stale token: a newer one was already used
	// stored: from B
}
