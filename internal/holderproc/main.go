// Command holderproc takes a relock Lock and holds it until it is killed: the
// process whose SIGKILL the fault tests inflict. It prints one line,
// "locked <token> <owner field>", once it holds the lock.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func main() {
	addr := flag.String("addr", "", "Redis address")
	name := flag.String("name", "", "lock name")
	lease := flag.Duration("lease", relock.DefaultWatchdogLease, "watchdog lease")
	flag.Parse()

	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	c := relock.New(rdb, relock.WithWatchdogLease(*lease))
	l := c.Lock(*name)
	ctx, err := l.Lock(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderproc:", err)
		os.Exit(1)
	}
	tok, err := l.Token(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holderproc:", err)
		os.Exit(1)
	}
	id, _ := relock.OwnerOf(ctx)
	fmt.Printf("locked %d %s:%s\n", tok, c.ID(), id)
	<-ctx.Done() // held, and renewed, until killed
	fmt.Fprintln(os.Stderr, "holderproc: hold ended:", context.Cause(ctx))
	time.Sleep(time.Hour)
}
