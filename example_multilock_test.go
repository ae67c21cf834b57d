package relock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock"
)

// A transfer locks both accounts at once. Whatever order the accounts come
// in, MultiLock takes them in one fixed order (here in one script call, as
// they share a Redis), so two opposite transfers cannot deadlock.
func ExampleMultiLock() {
	rdb, done := exampleRedis()
	defer done()
	c := relock.New(rdb)
	defer c.Close()

	transfer := func(ctx context.Context, from, to string) error {
		m := relock.NewMultiLock(c.Lock("account:"+from), c.Lock("account:"+to))
		ctx, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		defer m.Unlock(ctx)
		for _, l := range m.Locks() {
			n, _ := l.HoldCount(ctx)
			fmt.Println(l.Name(), "held:", n > 0)
		}
		return nil
	}
	if err := transfer(context.Background(), "bob", "alice"); err != nil {
		fmt.Println(err)
	}

	// All or nothing: while someone else holds alice, a single attempt gets
	// neither account.
	other, _ := c.Lock("account:alice").Lock(context.Background())
	m := relock.NewMultiLock(c.Lock("account:alice"), c.Lock("account:carol"))
	_, err := m.TryLock(context.Background(), 0, 0)
	fmt.Println("not obtained:", errors.Is(err, relock.ErrNotObtained))
	locked, _ := c.Lock("account:carol").IsLocked(context.Background())
	fmt.Println("carol locked:", locked)
	_ = c.Lock("account:alice").Unlock(other)
	// Output:
	// account:alice held: true
	// account:bob held: true
	// not obtained: true
	// carol locked: false
}
