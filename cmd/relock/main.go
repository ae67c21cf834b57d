// Command relock shows and repairs the locks relock keeps in Redis, for
// operators: who holds a lock, who waits, how long the lease has left, which
// fencing token the holder has; a live view of one lock; and a forced unlock.
//
// Usage:
//
//	relock [flags] inspect NAME        holders, waiters, leases and tokens of every kind of lock NAME
//	relock [flags] list [PATTERN]      the locks that exist now, one line per lock, with its owners (PATTERN: a Redis glob on names)
//	relock [flags] watch NAME          live view of NAME, re-printed when it changes
//	relock [flags] force-unlock NAME   release NAME whoever holds it, a Semaphore's permits too (asks first unless --yes; --owner, --token: only that hold)
//
// Redis comes from --redis or REDIS_URL: redis://host:port[/db],
// rediss://... (TLS), host:port, a comma-separated list of host:port or
// redis+cluster://h1,h2 for a Cluster, redis+sentinel://h1,h2/mastername for
// Sentinel. Flags may come before or after the command.
//
// Exit status: 0 when the command did its job — including when the lock does
// not exist ("no lock NAME"; with --json an object whose "exists" is false) —
// 1 when a Redis command failed, force-unlock was not confirmed or found a
// closed CountDownLatch without --delete-latch (it then releases nothing), 2 for a
// usage error, a bad URL or a Redis that cannot be reached.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	// go-redis logs failed dials itself; run reports them once, clearly.
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quiet is a go-redis logger that logs nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

const usage = `usage: relock [flags] COMMAND [ARG]

commands:
  inspect NAME        holders, waiters, leases and fencing tokens of the locks called NAME
  list [PATTERN]      the locks that exist now, one line each with its owners
                      (PATTERN: Redis glob on names)
  watch NAME          live view of NAME: re-printed when it changes, until Ctrl-C (or --for)
  force-unlock NAME   release NAME whoever holds it (a Semaphore's permits too); asks first
                      unless --yes; refuses a closed CountDownLatch unless --delete-latch;
                      --owner/--token: only the hold you saw, refused if the lock changed hands

Redis: --redis or REDIS_URL, one of
  redis://[user:pass@]host:port[/db]   rediss://... (TLS)   host:port
  host:port,host:port,...  or  redis+cluster://host:port,host:port   (Cluster)
  redis+sentinel://host:port,host:port/mastername[/db]                (Sentinel)

flags:
`

// cli is one invocation's settings and connections.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	json        bool
	yes         bool
	deleteLatch bool
	// guard: the hold force-unlock may free (--owner, --token), as the
	// operator saw it.
	guardOwner string
	guardToken int64
	forDur     time.Duration
	refresh    time.Duration

	target *target
	rdb    redis.UniversalClient
	c      *relock.Client
}

// run is the whole command: it parses args, connects and runs one command,
// and returns the exit status. main only wires it to the process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cl := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	conn, cmd, cargs, code := cl.parseArgs(args)
	if code >= 0 {
		return code
	}
	if code := cl.connect(ctx, conn); code != exitOK {
		return code
	}
	defer cl.rdb.Close()
	defer cl.c.Close()
	switch cmd {
	case "inspect":
		return cl.inspect(ctx, cargs[0])
	case "list":
		pattern := ""
		if len(cargs) == 1 {
			pattern = cargs[0]
		}
		return cl.list(ctx, pattern)
	case "watch":
		return cl.watch(ctx, cargs[0])
	default:
		return cl.forceUnlock(ctx, cargs[0])
	}
}

// connSettings are the flags that say where and how to connect.
type connSettings struct {
	redisURL, prefix string
	timeout          time.Duration
}

// parseArgs reads the flags into cl and conn and checks the command and its
// arguments. code is the exit status when the invocation ends here (help, a
// usage error), -1 when the command is to run.
func (cl *cli) parseArgs(args []string) (conn connSettings, cmd string, cargs []string, code int) {
	fs := flag.NewFlagSet("relock", flag.ContinueOnError)
	fs.SetOutput(cl.stderr)
	fs.StringVar(&conn.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis to use (default $REDIS_URL)")
	// "relock" is the library's own default prefix (see relock.WithKeyPrefix).
	fs.StringVar(&conn.prefix, "prefix", "relock", "key prefix of the locks (relock.WithKeyPrefix)")
	fs.DurationVar(&conn.timeout, "timeout", 5*time.Second, "how long to wait for Redis to answer the first time")
	fs.BoolVar(&cl.json, "json", false, "print JSON instead of a table (inspect, list, watch: one object per line; force-unlock)")
	fs.BoolVar(&cl.yes, "yes", false, "force-unlock without asking")
	fs.StringVar(&cl.guardOwner, "owner", "", "force-unlock: free only this owner's hold (as inspect shows it); refused if another holds the lock")
	fs.Int64Var(&cl.guardToken, "token", 0, "force-unlock: free only the hold at this fencing token; refused if another holds the lock")
	fs.BoolVar(&cl.deleteLatch, "delete-latch", false, "force-unlock: delete a closed CountDownLatch of that name too (refused without it)")
	fs.DurationVar(&cl.forDur, "for", 0, "watch: stop after this long (default: until interrupted)")
	fs.DurationVar(&cl.refresh, "refresh", 5*time.Second, "watch: re-read the lock this often too (lease expiry publishes nothing)")
	fs.Usage = func() {
		fmt.Fprint(cl.stderr, usage)
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return conn, "", nil, exitOK
	}
	if err != nil {
		return conn, "", nil, exitUsage // the flag package printed why
	}
	if len(pos) == 0 {
		fs.Usage()
		return conn, "", nil, exitUsage
	}
	cmd, cargs = pos[0], pos[1:]
	if cmd == "help" {
		fs.SetOutput(cl.stdout)
		fmt.Fprint(cl.stdout, usage)
		fs.PrintDefaults()
		return conn, cmd, cargs, exitOK
	}
	return conn, cmd, cargs, cl.checkCommand(cmd, cargs)
}

// checkCommand checks a command's name, its arguments and the flags that
// must agree with each other; it returns -1 when they are fine, else
// exitUsage after saying why.
func (cl *cli) checkCommand(cmd string, cargs []string) int {
	var nargs [2]int // min, max
	switch cmd {
	case "inspect", "watch", "force-unlock":
		nargs = [2]int{1, 1}
	case "list":
		nargs = [2]int{0, 1}
	default:
		fmt.Fprintf(cl.stderr, "relock: unknown command %q (inspect, list, watch, force-unlock)\n", cmd)
		return exitUsage
	}
	if len(cargs) < nargs[0] || len(cargs) > nargs[1] {
		if nargs[0] == 1 {
			fmt.Fprintf(cl.stderr, "relock: usage: relock %s NAME\n", cmd)
		} else {
			fmt.Fprintf(cl.stderr, "relock: usage: relock %s [PATTERN]\n", cmd)
		}
		return exitUsage
	}
	if cmd != "list" && cargs[0] == "" {
		fmt.Fprintln(cl.stderr, "relock: empty lock name")
		return exitUsage
	}
	if cl.refresh <= 0 || cl.forDur < 0 {
		fmt.Fprintln(cl.stderr, "relock: --refresh must be positive and --for not negative")
		return exitUsage
	}
	return -1
}

// connect makes cl's Redis client and relock Client and checks that Redis
// answers; on success the caller closes both, on failure nothing is left
// open.
func (cl *cli) connect(ctx context.Context, conn connSettings) int {
	var err error
	if cl.target, err = parseTarget(conn.redisURL); err != nil {
		fmt.Fprintf(cl.stderr, "relock: bad Redis URL: %v\n", err)
		return exitUsage
	}
	cl.rdb = cl.target.client()
	pctx, cancel := context.WithTimeout(ctx, conn.timeout)
	err = ping(pctx, cl.rdb)
	cancel()
	if err != nil {
		fmt.Fprintf(cl.stderr, "relock: cannot reach Redis at %s: %v\n", cl.target.display, err)
		cl.rdb.Close()
		return exitUsage
	}
	cl.c = relock.New(cl.rdb, relock.WithKeyPrefix(conn.prefix))
	if err := cl.c.Err(); err != nil {
		fmt.Fprintf(cl.stderr, "relock: %v\n", err)
		cl.c.Close()
		cl.rdb.Close()
		return exitUsage
	}
	return exitOK
}

// ping checks that Redis answers before ctx ends: go-redis does not stop a
// read when its context ends, so the PING runs on its own and is left to
// finish when the bound comes first.
func ping(ctx context.Context, rdb redis.UniversalClient) error {
	done := make(chan error, 1)
	go func() { done <- rdb.Ping(context.WithoutCancel(ctx)).Err() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer: %w", context.Cause(ctx))
	}
}

// parseInterleaved parses flags wherever they stand among the positional
// arguments (relock inspect NAME --json); after "--" everything is
// positional, so a name may start with '-'.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// fail reports a failed Redis command and returns its exit status.
func (cl *cli) fail(what string, err error) int {
	if errors.Is(err, relock.ErrInvalidArgument) {
		fmt.Fprintf(cl.stderr, "relock: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(cl.stderr, "relock: %s: %v\n", what, err)
	return exitFail
}

// kindName is how the human output names a kind: its Go type.
func kindName(k inspect.Kind) string {
	if row, ok := kinds.Of(k); ok {
		return row.Type
	}
	return string(k)
}
