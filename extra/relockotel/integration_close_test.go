//go:build relock_integration

// This test needs the core to report the holds a Close ends as losses
// (LostEvent.Cause wrapping ErrClientClosed). Run it with
//
//	go test -tags relock_integration ./...
//
// The tag goes once it does.

package relockotel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/extra/relockotel"
)

// A hold still open when its Client closes is a loss, cause client_closed,
// and leaves the holds gauge.
func TestClientCloseIsALoss(t *testing.T) {
	h := newHarness(t)
	srv := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c := relock.New(rdb, relock.WithObserver(h.obs))

	held, err := c.Lock("orders").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.Close())
	<-held.Done()
	if !errors.Is(context.Cause(held), relock.ErrClientClosed) {
		t.Fatalf("cause %v", context.Cause(held))
	}

	ms := h.metrics(t)
	wantSum(t, ms, "relock.lock.acquisitions", set(kindLock, contended(no), reentry(no)), 1)
	wantSum(t, ms, "relock.lock.losses", set(kindLock, cause(relockotel.CauseClientClosed)), 1)
	wantSum(t, ms, "relock.locks.held", set(kindLock), 0)
	wantHistCount(t, ms, "relock.lock.held", set(kindLock, lost(yes)), 1)
}
