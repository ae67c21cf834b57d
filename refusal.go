package relock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// refusal turns a reply by which Redis refused the Client's user — no
// password, a wrong one, an ACL that forbids a command relock needs — into
// an error wrapping ErrUnavailable whose message says so in plain words,
// keeping the server's reply for errors.As; any other error is returned as
// it is. Each server words these differently (Redis 7.0 answers an EVALSHA
// of more than ten arguments sent before AUTH with a protocol error; Valkey
// reports a forbidden command inside a script as an "ACL failure").
func refusal(err error) error {
	var reply redis.Error
	if err == nil || errors.Is(err, ErrUnavailable) || !errors.As(err, &reply) {
		return err
	}
	msg := reply.Error()
	for _, r := range refusals {
		if r.match(msg) {
			return fmt.Errorf("%w: %s: %w", ErrUnavailable, r.say, err)
		}
	}
	return err
}

var refusals = []struct {
	match func(string) bool
	say   string
}{
	{replyPrefixed("NOAUTH"), "Redis requires a password (NOAUTH): set Password (and Username) in go-redis's options"},
	{replyContains("Protocol error: unauthenticated"), "Redis requires a password and refused a request sent without one: set Password (and Username) in go-redis's options"},
	{replyPrefixed("WRONGPASS"), "Redis refused the username or password (WRONGPASS)"},
	{replyPrefixed("NOPERM"), "the Redis ACL user may not run a command or use a key relock needs (NOPERM): see the README's least-privilege ACL"},
	{replyContains("can't run this command or subcommand"), "the Redis ACL user may not run a command relock's scripts call: see the README's least-privilege ACL"},
	{replyContains("ACL failure in script"), "the Redis ACL user may not run a command relock's scripts call: see the README's least-privilege ACL"},
}

func replyPrefixed(p string) func(string) bool {
	return func(msg string) bool { return strings.HasPrefix(msg, p) }
}

func replyContains(s string) func(string) bool {
	return func(msg string) bool { return strings.Contains(msg, s) }
}
