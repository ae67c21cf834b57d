package relock_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// leastPrivilege is the ACL the README recommends for a relock user with the
// default key prefix: the script commands (SCRIPT LOAD keeps the scripts
// loaded; EVAL where it is refused), what the scripts call (which
// covers the queries: EXISTS, HGET, PTTL), pub/sub on relock's channels, PING
// for the subscriber's health checks and WAIT for WithReplicas; keys and
// channels under relock: only.
var leastPrivilege = slices.Concat(
	[]string{"on", ">s3cret", "resetkeys", "resetchannels", "~relock:*", "&relock:*", "-@all"},
	[]string{"+evalsha", "+eval", "+script|load"}, // the scripts
	allow(scriptCommands),
	[]string{"+publish", "+spublish", "+subscribe", "+unsubscribe", "+ssubscribe", "+sunsubscribe", "+ping"}, // waiting
	[]string{"+wait"}, // WithReplicas
)

// scriptCommands are the commands the scripts under scripts/ call, exactly
// (checked by TestLeastPrivilegeACL/MatchesTheScripts), and clientCommands;
// the scripts publish with the command they are given (PUBLISH or
// SPUBLISH).
var scriptCommands = []string{
	"hget", "hmget", "hset", "hexists", "hincrby", "hdel", "hgetall", "exists", "pttl", "pexpire", "del", "get", "set", "time",
	"zadd", "zrem", "zscore", "zrange", "zrangebyscore", "zremrangebyscore", "zcard", "zcount",
}

// clientCommands are the commands of scriptCommands that the Client sends
// itself, outside the scripts: GET and SET of the deadlock detection's wait
// records (deadlock.go).
var clientCommands = []string{"get", "set"}

func allow(cmds []string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = "+" + c
	}
	return out
}

// setUser sets the ACL user name with rules, less the commands the server
// does not know (Redis 6.2 refuses +spublish, +ssubscribe and +sunsubscribe,
// which relock does not use there).
func setUser(t *testing.T, admin *redis.Client, name string, rules []string) {
	t.Helper()
	args := []any{"acl", "setuser", name}
	for _, r := range rules {
		if cmd, ok := strings.CutPrefix(r, "+"); ok && !strings.ContainsAny(cmd, "@|") && !redistest.Knows(context.Background(), admin, cmd) {
			continue
		}
		args = append(args, r)
	}
	require.NoError(t, admin.Do(context.Background(), args...).Err())
}

func TestLeastPrivilegeACL(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	admin := srv.Client()
	setUser(t, admin, "relock", leastPrivilege)
	asUser := func(user string) *redis.Client {
		return srv.Client(func(o *redis.Options) { o.Username, o.Password = user, "s3cret" })
	}
	ctx := context.Background()

	eachKind(t, func(t *testing.T, k lockKind) {
		const lease = 600 * time.Millisecond
		holder := relock.New(asUser("relock"), relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = holder.Close() })
		waiter := relock.New(asUser("relock"), relock.WithWatchdogLease(lease))
		t.Cleanup(func() { _ = waiter.Close() })

		l := k.open(holder, "acl")
		hctx, err := l.Lock(ctx)
		require.NoError(t, err)
		inner, err := l.Lock(hctx)
		require.NoError(t, err)
		got := lockAsync(k.open(waiter, "acl"))
		require.Eventually(t, func() bool { return waiter.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
		waitTicks(t, holder, 4) // renewals past the lease
		require.NoError(t, hctx.Err())
		assert.Equal(t, map[string]string{ownerField(t, holder, hctx): "2"}, k.state(t, admin, k.keyOf(holder, "acl")))
		require.NoError(t, l.Unlock(inner))
		require.NoError(t, l.Unlock(hctx))
		wctx := mustGet(t, got, 5*time.Second)
		require.NoError(t, k.open(waiter, "acl").Unlock(wctx))
	})

	t.Run("Queries", func(t *testing.T) {
		c := relock.New(asUser("relock"))
		t.Cleanup(func() { _ = c.Close() })
		l := c.Lock("acl-queries")
		hctx, err := l.Lock(ctx)
		require.NoError(t, err)
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		n, err := l.HoldCount(hctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		assert.Positive(t, ttl)
		freed, err := l.ForceUnlock(ctx)
		require.NoError(t, err)
		assert.True(t, freed)
	})

	// The ACL grants what the scripts call and nothing more, and the README
	// recommends exactly this ACL.
	t.Run("MatchesTheScripts", func(t *testing.T) {
		files, err := filepath.Glob("scripts/*.lua")
		require.NoError(t, err)
		require.NotEmpty(t, files)
		calls := regexp.MustCompile(`redis\.call\(\s*'([a-zA-Z]+)'`)
		called := map[string]bool{}
		inspect := map[string]bool{}
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			into := called
			if filepath.Base(f) == "inspect.lua" {
				into = inspect // Client.Inspect, for operators: not locking
			}
			for _, m := range calls.FindAllStringSubmatch(string(src), -1) {
				into[strings.ToLower(m[1])] = true
			}
		}
		inScripts := slices.DeleteFunc(slices.Clone(scriptCommands), func(c string) bool { return slices.Contains(clientCommands, c) })
		assert.ElementsMatch(t, slices.Sorted(maps.Keys(called)), inScripts)
		// What the README says Inspect and the CLI add: +type (and +scan).
		for cmd := range inspect {
			assert.True(t, slices.Contains(scriptCommands, cmd) || cmd == "type", "inspect calls %s", cmd)
		}

		readme, err := os.ReadFile("docs/operating.md")
		require.NoError(t, err)
		var line string
		for l := range strings.Lines(string(readme)) {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "ACL SETUSER relock ") {
				line = l
			}
		}
		require.NotEmpty(t, line, "docs/operating.md shows the ACL")
		want := slices.Clone(leastPrivilege)
		want[slices.Index(want, ">s3cret")] = ">PASSWORD"
		assert.Equal(t, want, strings.Fields(line)[3:])
	})

	t.Run("NothingElse", func(t *testing.T) {
		rdb := asUser("relock")
		require.NoError(t, admin.Set(ctx, "other", "x", 0).Err())
		assert.ErrorContains(t, rdb.Get(ctx, "other").Err(), "NOPERM")
		assert.ErrorContains(t, rdb.FlushAll(ctx).Err(), "NOPERM")
		assert.ErrorContains(t, rdb.Publish(ctx, "other", "x").Err(), "NOPERM")
		// A script cannot reach beyond the key pattern either.
		err := rdb.Eval(ctx, "return redis.call('get', KEYS[1])", []string{"other"}).Err()
		assert.ErrorContains(t, err, "NOPERM")
	})

	// With a permission missing, the acquire fails at once, not obtained
	// because Redis refused the user (ErrUnavailable), in plain words
	// whatever the server's wording (Redis 7.0 says the user "can't run this
	// command", Valkey "has no permissions to run the 'hset' command"), with
	// the server's reply kept; and nothing is written.
	t.Run("MissingPermissionIsReported", func(t *testing.T) {
		rules := append(append([]string{}, leastPrivilege...), "-hset")
		setUser(t, admin, "nohset", rules)
		c := relock.New(asUser("nohset"))
		t.Cleanup(func() { _ = c.Close() })
		l := c.Lock("acl-nohset")
		start := time.Now()
		_, err := l.Lock(ctx)
		require.Error(t, err)
		assert.Less(t, time.Since(start), time.Second, "refused at once, not retried")
		var reply redis.Error
		assert.ErrorAs(t, err, &reply, "the server's error stays reachable")
		assert.ErrorIs(t, err, relock.ErrNotObtained)
		assert.ErrorIs(t, err, relock.ErrUnavailable)
		assert.ErrorContains(t, err, "ACL user may not run a command")
		assert.Empty(t, hgetall(t, admin, l.Key()))
	})
}

// Another client — another process that knows or guesses the lock name, or
// even an owner id — cannot release or renew a hold it does not own.
func TestForeignClientCannotReleaseOrRenew(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		const lease = 2 * time.Second
		owner := b.newClient(t)
		hctx, err := owner.Lock("secret").TryLock(ctx, 0, lease)
		require.NoError(t, err)
		key := owner.Lock("secret").Key()
		before := hgetall(t, b.rdb, key)

		intruder := relock.New(b.newConn(t))
		t.Cleanup(func() { _ = intruder.Close() })
		l := intruder.Lock("secret")
		assert.ErrorIs(t, l.Unlock(ctx), relock.ErrNotHeld)
		assert.ErrorIs(t, l.Unlock(hctx), relock.ErrNotHeld, "the owner's context means nothing to another client")
		id, _ := relock.OwnerOf(hctx)
		for _, guess := range []string{id, "1", owner.ID(), owner.ID() + ":" + id + "x"} {
			gctx, err := relock.WithOwner(ctx, guess)
			require.NoError(t, err)
			assert.ErrorIs(t, l.Unlock(gctx), relock.ErrNotHeld)
			_, err = l.TryLock(gctx, 0, 0)
			assert.ErrorIs(t, err, relock.ErrNotObtained, "guess %q", guess)
		}
		assert.Equal(t, before, hgetall(t, b.rdb, key))
		if b.real() {
			assert.LessOrEqual(t, pttl(t, b.rdb, key), lease, "nobody renewed the owner's lease")
		}
		require.NoError(t, owner.Lock("secret").Unlock(hctx))
	})
}
