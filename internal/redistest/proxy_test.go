package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A delay shifts every chunk by the same time, as a slow link does: a
// command too large for one read (512 KiB, many chunks) takes one round trip
// longer, not one delay per chunk.
func TestProxyDelayDoesNotAddUp(t *testing.T) {
	srv := Start(t)
	proxy := NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: 30 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const d = 100 * time.Millisecond
	proxy.SetDelay(d)
	start := time.Now()
	if err := rdb.Set(ctx, "big", strings.Repeat("x", 512<<10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A delay per chunk of at most 32 KiB would take 16 × d and more.
	if took := time.Since(start); took < 2*d || took > 2*d+500*time.Millisecond {
		t.Fatalf("a 512 KiB SET took %v with a delay of %v each way; want one round trip (%v) and the transfer", took, d, 2*d)
	}
}

// SetReplyDelay delays only what the server sends; Blackhole silences the
// connections open now and not later ones; CutBlackholed fails their
// pending commands at once.
func TestProxyReplyDelayAndBlackhole(t *testing.T) {
	srv := Start(t)
	proxy := NewProxy(t, srv.Addr())
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	const d = 300 * time.Millisecond
	proxy.SetReplyDelay(d)
	start := time.Now()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d || took >= 2*d {
		t.Fatalf("a ping took %v with a reply delay of %v: want the delay once", took, d)
	}
	proxy.SetReplyDelay(0)

	proxy.Blackhole()
	fresh := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = fresh.Close() })
	if err := fresh.Ping(ctx).Err(); err != nil {
		t.Fatalf("a connection opened after the blackhole: %v", err)
	}
	pinged := make(chan error, 1)
	go func() { pinged <- rdb.Ping(ctx).Err() }()
	select {
	case err := <-pinged:
		t.Fatalf("a blackholed connection answered: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	proxy.CutBlackholed()
	select {
	case err := <-pinged:
		if err == nil {
			t.Fatal("a cut connection answered its pending command")
		}
	case <-time.After(2 * time.Second): // go-redis's read timeout is 3 s
		t.Fatal("the pending command did not fail when its connection was cut")
	}
}
