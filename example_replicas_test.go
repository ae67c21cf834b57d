package relock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// WithReplicas makes Lock wait until the hold has reached a replica. This
// server has none, so Lock fails — and takes back the hold it was granted.
func ExampleWithReplicas() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	c := relock.New(rdb, relock.WithReplicas(1, 100*time.Millisecond))
	defer c.Close()
	orders := c.Lock("orders")
	_, err = orders.Lock(context.Background())
	fmt.Println("not replicated:", errors.Is(err, relock.ErrNotReplicated))
	fmt.Println("not obtained:", errors.Is(err, relock.ErrNotObtained))
	locked, _ := orders.IsLocked(context.Background())
	fmt.Println("locked:", locked)
	// Output:
	// not replicated: true
	// not obtained: true
	// locked: false
}
