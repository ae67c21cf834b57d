// Command redlock shows relock's RedLock over three independent Redis
// masters: the lock is held once a majority (two) granted it, so it stays
// available while one master is down, and not when two are.
//
//	go run ./examples/redlock
//
// It always runs on three embedded miniredis servers, whatever REDIS_URL
// says, since it stops two of them.
package main

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/examples/internal/exampleredis"
)

// quiet drops go-redis's own log lines ("failed to dial") about the masters
// this story stops on purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{})
	story := exampleredis.NewStory("relock redlock on three embedded miniredis servers (REDIS_URL is not used: the story stops two of them)")
	var masters []*exampleredis.Server
	var clients []*relock.Client
	for range 3 {
		srv := exampleredis.Embedded()
		defer srv.Close()
		masters = append(masters, srv)
		clients = append(clients, srv.Relock())
	}
	// The first Client is the RedLock's home: it runs the waits and its
	// watchdog renews the hold on every master. A master that does not
	// answer within the node timeout counts as down for that round; it is
	// not short here, where a miniredis loading a script on a busy machine
	// can take 100 ms.
	report := relock.NewRedLock("report", clients, relock.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()

	lockAndUnlock := func() {
		held, err := report.TryLock(ctx, time.Second, 0)
		if err != nil {
			log.Fatal(err)
		}
		validity, _ := report.Validity(held)
		token, _ := report.Token(held)
		story.Say("app", "locked %q: valid for %v, fencing token %d", report.Name(), validity.Round(100*time.Millisecond), token)
		if err := report.Unlock(held); err != nil {
			story.Say("app", "unlocked (%v)", err)
			return
		}
		story.Say("app", "unlocked")
	}

	story.Say("app", "a majority is %d of %d masters", report.Quorum(), len(masters))
	lockAndUnlock()

	masters[2].Stop()
	story.Say("master 3", "down")
	lockAndUnlock()

	masters[1].Stop()
	story.Say("master 2", "down")
	held, err := report.TryLock(ctx, 300*time.Millisecond, 0)
	if err == nil {
		_ = report.Unlock(held) // not expected: one master of three is no majority
	}
	story.Say("app", "TryLock for 300ms with one master of three: not obtained = %v (no majority)",
		errors.Is(err, relock.ErrNotObtained))
}
