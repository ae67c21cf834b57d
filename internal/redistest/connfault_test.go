package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestConnFaultsDelaySubscriberOnly checks that a delay set on subscriber
// connections holds back pub/sub messages and not command replies.
func TestConnFaultsDelaySubscriberOnly(t *testing.T) {
	srv := Start(t)
	f := NewConnFaults()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(f)
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, "ch")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	const d = 300 * time.Millisecond
	f.SetDelay(SubscriberConn, d)
	start := time.Now()
	if err := rdb.Publish(ctx, "ch", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= d {
		t.Fatalf("a command reply took %v: the subscriber's delay reached a command connection", took)
	}
	if _, err := ps.ReceiveMessage(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("the message came after %v, before the subscriber's delay of %v", took, d)
	}
}

// TestConnFaultsCutBefore checks that a cut before a command fails that
// command without running it.
func TestConnFaultsCutBefore(t *testing.T) {
	srv := Start(t)
	f := NewConnFaults()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(f)
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f.CutBefore(CommandConn, "SET", 1)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); !errors.Is(err, ErrCut) {
		t.Fatalf("SET after CutBefore: %v, want ErrCut", err)
	}
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k = %d, %v: the cut command ran", n, err)
	}
	if f.Cuts() != 1 {
		t.Fatalf("Cuts() = %d, want 1", f.Cuts())
	}
}
