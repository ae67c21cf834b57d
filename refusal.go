package relock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// refusal turns a reply by which Redis refused a request for a reason that
// says nothing about the lock (see refusedBy) into an error wrapping
// ErrUnavailable whose message says so in plain words, keeping the
// server's reply for errors.As; any other error is returned as it is.
func refusal(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if r := refusedBy(err); r != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, r.say, err)
	}
	return err
}

// refusedBy is the one classification of Redis's error replies, which
// every path that reports, retries or reacts to one uses (refusal,
// transient, noteFault): the rule err's reply matches, or nil when err is
// no reply or a reply about the request itself (a script's error, an
// unknown command), which stays as it is. relock's scripts never answer
// with an error reply of their own, so a reply that begins with one of
// these words is Redis's.
func refusedBy(err error) *refusalRule {
	var reply redis.Error
	if err == nil || !errors.As(err, &reply) {
		return nil
	}
	msg := reply.Error()
	for i := range refusals {
		if refusals[i].match(msg) {
			return &refusals[i]
		}
	}
	return nil
}

// A refusalRule is one way Redis refuses a request. Every one of them makes
// the request fail with ErrUnavailable (not "someone else holds the lock").
type refusalRule struct {
	match func(string) bool
	say   string
	// passes: the refusal comes from a state the server leaves by itself
	// (a script that ends, a failover, a reshard, memory freed), so the
	// same request is retried with backoff within its bound (transient).
	// A refusal of the Client's user does not pass by waiting.
	passes bool
	// forgets: the server may have restarted or failed over and forgotten
	// locks, so the Client checks its holds at once (noteFault).
	forgets bool
}

// Each server words the refusals of a user differently (Redis 7.0 answers
// an EVALSHA of more than ten arguments sent before AUTH with a protocol
// error; Valkey reports a forbidden command inside a script as an "ACL
// failure"). A refusal inside a script keeps its code in Redis 7 ("OOM
// command not allowed … script: …"). ASK and MOVED reach relock only once
// go-redis's own redirects (MaxRedirects) ran out in a reshard.
var refusals = []refusalRule{
	{match: replyPrefixed("NOAUTH"), say: "Redis requires a password (NOAUTH): set Password (and Username) in go-redis's options"},
	{match: replyContains("Protocol error: unauthenticated"), say: "Redis requires a password and refused a request sent without one: set Password (and Username) in go-redis's options"},
	{match: replyPrefixed("WRONGPASS"), say: "Redis refused the username or password (WRONGPASS)"},
	{match: replyPrefixed("NOPERM"), say: "the Redis ACL user may not run a command or use a key relock needs (NOPERM): see the least-privilege ACL in docs/operating.md"},
	{match: replyContains("can't run this command or subcommand"), say: "the Redis ACL user may not run a command relock's scripts call: see the least-privilege ACL in docs/operating.md"},
	{match: replyContains("ACL failure in script"), say: "the Redis ACL user may not run a command relock's scripts call: see the least-privilege ACL in docs/operating.md"},

	{match: replyWord("OOM"), say: "Redis is out of memory and refuses writes (maxmemory with noeviction)", passes: true},
	{match: replyWord("BUSY"), say: "Redis is busy running a script or function", passes: true},
	{match: replyWord("READONLY"), say: "the server is a read-only replica (after a failover?)", passes: true, forgets: true},
	{match: replyWord("LOADING"), say: "Redis is loading its data set", passes: true, forgets: true},
	{match: replyWord("MASTERDOWN"), say: "the replica lost its master", passes: true, forgets: true},
	{match: replyWord("CLUSTERDOWN"), say: "the Redis Cluster is down", passes: true},
	{match: replyWord("TRYAGAIN"), say: "the lock's hash slot is being resharded", passes: true},
	{match: replyWord("ASK"), say: "the lock's hash slot is being resharded (go-redis's redirects ran out)", passes: true},
	{match: replyWord("MOVED"), say: "the lock's hash slot moved (go-redis's redirects ran out)", passes: true},
	{match: replyWord("NOSCRIPT"), say: "Redis does not know relock's script, and loading it failed", passes: true},
	{match: replyWord("MISCONF"), say: "Redis refuses writes: it cannot persist its data", passes: true},
	{match: replyWord("NOREPLICAS"), say: "Redis refuses writes: not enough replicas (min-replicas-to-write)", passes: true},
	{match: replyPrefixed("ERR max number of clients reached"), say: "Redis refuses connections: max number of clients reached", passes: true},
}

func replyPrefixed(p string) func(string) bool {
	return func(msg string) bool { return strings.HasPrefix(msg, p) }
}

func replyContains(s string) func(string) bool {
	return func(msg string) bool { return strings.Contains(msg, s) }
}

// replyWord matches a reply whose error code is w (BUSY, not BUSYKEY),
// or a script's error that carries it as Redis 6.2 words one ("ERR Error
// running script … -OOM command not allowed …").
func replyWord(w string) func(string) bool {
	return func(msg string) bool {
		return strings.HasPrefix(msg, w) && (len(msg) == len(w) || msg[len(w)] == ' ') ||
			strings.HasPrefix(msg, "ERR ") && strings.Contains(msg, " -"+w+" ")
	}
}
