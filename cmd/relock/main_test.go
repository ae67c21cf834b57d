package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once (the
// output of a running watch).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// result is what one run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// relockCmd runs the command in-process with the given stdin.
func relockCmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// deployment is one Redis the command runs against.
type deployment struct {
	url string
	rdb redis.UniversalClient
}

func (d deployment) client(t *testing.T, opts ...relock.Option) *relock.Client {
	c := relock.New(d.rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// cmd runs relock --redis <this deployment> args...
func (d deployment) cmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return relockCmd(t, stdin, append([]string{"--redis", d.url}, args...)...)
}

func owner(t *testing.T, c *relock.Client, ctx context.Context) string {
	t.Helper()
	id, ok := relock.OwnerOf(ctx)
	require.True(t, ok)
	return c.ID() + ":" + id
}

func TestCLI(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		suite(t, deployment{url: "redis://" + srv.Addr(), rdb: srv.Client()})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3, 0)
		d := deployment{url: strings.Join(cl.Addrs(), ","), rdb: cl.Client()}
		suite(t, d)
		t.Run("ClusterURL", func(t *testing.T) {
			d := d
			d.url = "redis+cluster://" + strings.Join(cl.Addrs(), ",")
			testInspectLock(t, d)
		})
	})
}

func suite(t *testing.T, d deployment) {
	t.Run("InspectLock", func(t *testing.T) { testInspectLock(t, d) })
	t.Run("InspectFairLockWaiters", func(t *testing.T) { testInspectFair(t, d) })
	t.Run("InspectRWLockReaders", func(t *testing.T) { testInspectRW(t, d) })
	t.Run("UnknownName", func(t *testing.T) { testUnknown(t, d) })
	t.Run("ForceUnlock", func(t *testing.T) { testForceUnlock(t, d) })
	t.Run("List", func(t *testing.T) { testList(t, d) })
	t.Run("ListLockWaiters", func(t *testing.T) { testListLockWaiters(t, d) })
	t.Run("WatchRelease", func(t *testing.T) { testWatchRelease(t, d) })
	t.Run("WatchFairHandover", func(t *testing.T) { testWatchFair(t, d) })
	t.Run("WatchLeaseExpiry", func(t *testing.T) { testWatchExpiry(t, d) })
	t.Run("Semaphore", func(t *testing.T) { testSemaphore(t, d) })
	t.Run("WatchSemaphore", func(t *testing.T) { testWatchSemaphore(t, d) })
	t.Run("CountDownLatch", func(t *testing.T) { testLatch(t, d) })
	t.Run("ForceUnlockSemaphore", func(t *testing.T) { testForceSemaphore(t, d) })
	t.Run("ForceUnlockLatch", func(t *testing.T) { testForceLatch(t, d) })
}

func testInspectLock(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t, relock.WithName("orders-7@host-a"))
	name := "cli/lock-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	l := c.Lock(name)
	outer, err := l.Lock(ctx)
	require.NoError(t, err)
	hctx, err := l.Lock(outer) // a re-entry: count 2
	require.NoError(t, err)
	defer func() {
		require.NoError(t, l.Unlock(hctx))
		require.NoError(t, l.Unlock(outer))
	}()
	tok, err := l.Token(hctx)
	require.NoError(t, err)
	own := owner(t, c, hctx)
	// The Client writes its name record at its first hold, in the
	// background.
	require.Eventually(t, func() bool {
		st, err := c.Inspect(ctx, name)
		return err == nil && st.Lock != nil && st.Lock.Holders[0].Name == "orders-7@host-a"
	}, 5*time.Second, 5*time.Millisecond)

	r := d.cmd(t, "", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	assert.Regexp(t, `^KIND\s+ROLE\s+OWNER\s+NAME\s+HOLDS\s+EXPIRES IN\s+TOKEN$`, lines[0])
	assert.Regexp(t, `^Lock\s+holder\s+`+own+`\s+orders-7@host-a\s+2\s+[0-9.]+m?s\s+`+strconv.FormatInt(tok, 10)+`$`, lines[1])
	// The columns line up.
	assert.Equal(t, strings.Index(lines[0], "OWNER"), strings.Index(lines[1], own))

	r = d.cmd(t, "", "inspect", name, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	assert.Equal(t, name, js.Name)
	assert.True(t, js.Exists)
	assert.Equal(t, []string{"lock"}, js.Kinds)
	require.NotNil(t, js.Lock)
	require.Len(t, js.Lock.Holders, 1)
	assert.Equal(t, own, js.Lock.Holders[0].Owner)
	assert.Equal(t, "orders-7@host-a", js.Lock.Holders[0].Name)
	assert.Equal(t, 2, js.Lock.Holders[0].Count)
	assert.Greater(t, js.Lock.Holders[0].LeaseMs, int64(0))
	assert.LessOrEqual(t, js.Lock.LeaseMs, (30 * time.Second).Milliseconds(), "the default watchdog lease")
	assert.Equal(t, tok, js.Lock.Token)
	assert.Nil(t, js.FairLock)
	assert.Nil(t, js.RWLock)
}

func testInspectFair(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t)
	const name = "cli/fair"
	l := c.FairLock(name)
	hctx, err := l.Lock(ctx)
	require.NoError(t, err)

	var wg sync.WaitGroup
	var ids []string
	for i := range 2 {
		w := d.client(t)
		ids = append(ids, w.ID())
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, err := w.FairLock(name).Lock(ctx)
			if assert.NoError(t, err) {
				assert.NoError(t, w.FairLock(name).Unlock(wctx))
			}
		}()
		require.Eventually(t, func() bool {
			st, err := c.Inspect(ctx, name)
			return err == nil && st.FairLock != nil && len(st.FairLock.Waiters) == i+1
		}, 5*time.Second, 10*time.Millisecond)
	}

	r := d.cmd(t, "", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4)
	assert.Regexp(t, `^FairLock\s+holder\s+`+owner(t, c, hctx)+`\s+\S+\s+1\s`, lines[1])
	// A FairLock waiter has no deadline of its own (a hand-over skips a
	// waiter whose Client stopped listening): no lease, no deadline.
	assert.Regexp(t, `^FairLock\s+queued #1\s+`+ids[0]+`:\S+\s+\S+\s+-\s+-\s+-$`, lines[2])
	assert.Regexp(t, `^FairLock\s+queued #2\s+`+ids[1]+`:\S+\s+\S+\s+-\s+-\s+-$`, lines[3])

	r = d.cmd(t, "", "--json", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.NotNil(t, js.FairLock)
	assert.Equal(t, []string{"fairlock"}, js.Kinds)
	require.Len(t, js.FairLock.Waiters, 2)
	for i, w := range js.FairLock.Waiters {
		assert.True(t, strings.HasPrefix(w.Owner, ids[i]+":"))
		assert.Nil(t, w.Deadline)
		assert.Zero(t, w.RemainingMs)
	}

	require.NoError(t, l.Unlock(hctx))
	wg.Wait()
}

func testInspectRW(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t)
	const name = "cli/rw"
	rl := c.RWLock(name).ReadLock()
	r1, err := rl.Lock(ctx)
	require.NoError(t, err)
	r2, err := rl.Lock(ctx)
	require.NoError(t, err)
	w := d.client(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wctx, err := w.RWLock(name).WriteLock().Lock(ctx)
		if assert.NoError(t, err) {
			assert.NoError(t, w.RWLock(name).WriteLock().Unlock(wctx))
		}
	}()
	require.Eventually(t, func() bool {
		st, err := c.Inspect(ctx, name)
		return err == nil && st.RWLock != nil && len(st.RWLock.WritersWaiting) == 1
	}, 5*time.Second, 10*time.Millisecond)

	r := d.cmd(t, "", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	assert.Regexp(t, `(?m)^RWLock\s+reader\s+`+owner(t, c, r1)+`\s+\S+\s+1\s+[0-9.]+m?s\s+-$`, r.stdout)
	assert.Regexp(t, `(?m)^RWLock\s+reader\s+`+owner(t, c, r2)+`\s+\S+\s+1\s`, r.stdout)
	assert.Regexp(t, `(?m)^RWLock\s+writer waiting\s+`+w.ID()+`:\S+\s+\S+\s+-\s`, r.stdout)
	assert.NotRegexp(t, `(?m)^RWLock\s+writer\s+[0-9a-f]{8}-`, r.stdout)

	r = d.cmd(t, "", "inspect", "--json", name)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.NotNil(t, js.RWLock)
	assert.Len(t, js.RWLock.Readers, 2)
	assert.Nil(t, js.RWLock.Writer)
	assert.Len(t, js.RWLock.WritersWaiting, 1)

	require.NoError(t, rl.Unlock(r1))
	require.NoError(t, rl.Unlock(r2))
	<-done
}

func testUnknown(t *testing.T, d deployment) {
	r := d.cmd(t, "", "inspect", "cli/nobody")
	assert.Equal(t, result{code: 0, stdout: "no lock cli/nobody\n"}, r)

	r = d.cmd(t, "", "inspect", "cli/nobody", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	assert.Equal(t, "cli/nobody", js["name"])
	assert.Equal(t, false, js["exists"])
	assert.Equal(t, []any{}, js["kinds"])
	assert.NotContains(t, js, "lock")

	r = d.cmd(t, "", "force-unlock", "cli/nobody")
	assert.Equal(t, result{code: 0, stdout: "no lock cli/nobody\n"}, r)
	r = d.cmd(t, "", "force-unlock", "--json", "cli/nobody")
	assert.Equal(t, result{code: 0, stdout: `{"name":"cli/nobody","released":[]}` + "\n"}, r)
}

func testForceUnlock(t *testing.T, d deployment) {
	ctx := context.Background()
	const name = "cli/force"
	// A short watchdog lease: holders learn at their next renewal that they
	// lost the lock.
	c := d.client(t, relock.WithWatchdogLease(900*time.Millisecond))
	hctx, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)
	own := owner(t, c, hctx)

	// Declined: nothing changes.
	for _, answer := range []string{"n\n", "\n", ""} {
		r := d.cmd(t, answer, "force-unlock", name)
		assert.Equal(t, 1, r.code)
		assert.Equal(t, "release lock "+name+" held by "+own+" ("+c.Name()+", 1 hold) [Lock]? [y/N] not confirmed; nothing released\n", r.stderr)
		assert.Empty(t, r.stdout)
		held, err := c.Lock(name).HoldCount(hctx)
		require.NoError(t, err)
		assert.Equal(t, 1, held)
	}

	// Confirmed on stdin.
	r := d.cmd(t, "y\n", "force-unlock", name)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "released Lock "+name+" held by "+own+" ("+c.Name()+", 1 hold)\n", r.stdout)
	assert.Contains(t, r.stderr, "[y/N]")
	<-hctx.Done()
	assert.ErrorIs(t, context.Cause(hctx), relock.ErrLockLost)

	// --yes, every kind at once, with a waiter that is woken.
	other := d.client(t, relock.WithWatchdogLease(900*time.Millisecond))
	l1, err := other.Lock(name).Lock(ctx)
	require.NoError(t, err)
	f1, err := other.FairLock(name).Lock(ctx)
	require.NoError(t, err)
	w1, err := other.RWLock(name).WriteLock().Lock(ctx)
	require.NoError(t, err)
	rd1, err := other.RWLock(name).ReadLock().Lock(w1) // downgrade-style read under the write hold
	require.NoError(t, err)
	waiter := d.client(t)
	got := make(chan error, 1)
	go func() {
		wctx, err := waiter.FairLock(name).Lock(ctx)
		if err == nil {
			err = waiter.FairLock(name).Unlock(wctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		st, err := c.Inspect(ctx, name)
		return err == nil && st.FairLock != nil && len(st.FairLock.Waiters) == 1
	}, 5*time.Second, 10*time.Millisecond)

	r = d.cmd(t, "", "force-unlock", name, "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	assert.Empty(t, r.stderr)
	assert.Equal(t, strings.Join([]string{
		"released Lock " + name + " held by " + owner(t, other, l1) + " (" + other.Name() + ", 1 hold)",
		"released FairLock " + name + " held by " + owner(t, other, f1) + " (" + other.Name() + ", 1 hold); woke the first of 1 queued waiters",
		"released RWLock write " + name + " held by " + owner(t, other, w1) + " (" + other.Name() + ", 1 hold)",
		"released RWLock read " + name + " held by " + owner(t, other, rd1) + " (" + other.Name() + ", 1 hold)",
	}, "\n")+"\n", r.stdout)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the queued waiter was not woken")
	}
	for _, h := range []context.Context{l1, f1, w1, rd1} {
		<-h.Done()
	}
	st, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.False(t, st.Exists())

	// --json.
	l2, err := other.Lock(name).Lock(ctx)
	require.NoError(t, err)
	r = d.cmd(t, "", "--json", "--yes", "force-unlock", name)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonForce
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.Len(t, js.Released, 1)
	assert.Equal(t, "lock", js.Released[0].Kind)
	assert.Equal(t, owner(t, other, l2), js.Released[0].Holders[0].Owner)
}

func TestCLIBadRedis(t *testing.T) {
	port, err := redistest.FreePort()
	require.NoError(t, err)
	t.Setenv("REDIS_URL", "")
	for _, tc := range []struct {
		url, msg string
	}{
		{"", "relock: bad Redis URL: no Redis given: use --redis URL or set REDIS_URL\n"},
		{"bogus://x", `relock: bad Redis URL: unknown scheme "bogus"`},
		{"localhost", `relock: bad Redis URL: "localhost" is not host:port`},
		{"redis://h:1/notadb", "relock: bad Redis URL: redis: invalid database number"},
		{"redis+sentinel://h:1", "relock: bad Redis URL: a Sentinel URL needs the primary's name"},
		{"redis://127.0.0.1:" + strconv.Itoa(port), "relock: cannot reach Redis at redis://127.0.0.1:" + strconv.Itoa(port) + ": "},
		{"redis://u:secret@127.0.0.1:" + strconv.Itoa(port), "relock: cannot reach Redis at redis://u:xxxxx@127.0.0.1:" + strconv.Itoa(port) + ": "},
		{"127.0.0.1:" + strconv.Itoa(port) + ",127.0.0.1:" + strconv.Itoa(port), "relock: cannot reach Redis at cluster 127.0.0.1:"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			r := relockCmd(t, "", "--redis", tc.url, "--timeout", "2s", "inspect", "x")
			assert.Equal(t, 2, r.code)
			assert.Empty(t, r.stdout)
			assert.True(t, strings.HasPrefix(r.stderr, tc.msg), "stderr %q", r.stderr)
			assert.NotContains(t, r.stderr, "secret")
		})
	}
	// REDIS_URL is read when --redis is absent.
	t.Setenv("REDIS_URL", "redis://127.0.0.1:"+strconv.Itoa(port))
	r := relockCmd(t, "", "list")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "cannot reach Redis at redis://127.0.0.1:"+strconv.Itoa(port))
}

func TestCLIUsage(t *testing.T) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr()
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"inspect"},
		{"inspect", "a", "b"},
		{"list", "a", "b"},
		{"--nosuchflag", "list"},
		{"inspect", ""},
		{"--prefix", "a{b", "inspect", "x"},
	} {
		r := relockCmd(t, "", append([]string{"--redis", url}, args...)...)
		assert.Equal(t, 2, r.code, "%q: %s", args, r.stderr)
		assert.NotEmpty(t, r.stderr, "%q", args)
		assert.Empty(t, r.stdout, "%q", args)
	}
	r := relockCmd(t, "", "help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "force-unlock NAME")
	// A name that starts with '-' after "--".
	r = relockCmd(t, "", "--redis", url, "inspect", "--", "-odd")
	assert.Equal(t, result{code: 0, stdout: "no lock -odd\n"}, r)
}

// TestCLILeastPrivilege runs the command as a user with the README's
// least-privilege ACL plus what docs/operating.md says the CLI adds.
func TestCLILeastPrivilege(t *testing.T) {
	readme, err := os.ReadFile("../../docs/operating.md")
	require.NoError(t, err)
	var rules []string
	for _, line := range strings.Split(string(readme), "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "ACL" && f[1] == "SETUSER" && f[2] == "relock" {
			rules = f[3:]
		}
	}
	require.NotEmpty(t, rules, "docs/operating.md has no ACL SETUSER relock line")
	args := []any{"acl", "setuser", "relockcli"}
	srv := redistest.Start(t)
	for _, r := range rules {
		if strings.HasPrefix(r, ">") {
			r = ">s3cret"
		}
		if cmd, ok := strings.CutPrefix(r, "+"); ok && !strings.ContainsAny(cmd, "@|") && !redistest.Knows(context.Background(), srv.Client(), cmd) {
			continue // a command the server does not have (Redis 6.2: the sharded pub/sub ones)
		}
		args = append(args, r)
	}
	args = append(args, "+type", "+scan")
	require.NoError(t, srv.Client().Do(context.Background(), args...).Err())

	d := deployment{url: "redis://relockcli:s3cret@" + srv.Addr(), rdb: srv.Client()}
	t.Run("InspectLock", func(t *testing.T) { testInspectLock(t, d) })
	t.Run("InspectFairLockWaiters", func(t *testing.T) { testInspectFair(t, d) })
	t.Run("ForceUnlock", func(t *testing.T) { testForceUnlock(t, d) })
	t.Run("WatchRelease", func(t *testing.T) { testWatchRelease(t, d) })
	t.Run("WatchFairHandover", func(t *testing.T) { testWatchFair(t, d) })
	t.Run("List", func(t *testing.T) {
		c := d.client(t)
		hctx, err := c.Lock("acl/list").Lock(context.Background())
		require.NoError(t, err)
		r := d.cmd(t, "", "list", "acl/*")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Regexp(t, `(?m)^acl/list\s+Lock\s+1\s`, r.stdout)
		require.NoError(t, c.Lock("acl/list").Unlock(hctx))
	})
}

func TestCLISentinel(t *testing.T) {
	s := redistest.StartSentinel(t, 0, 1)
	ctx := context.Background()
	c := relock.New(s.Primary.Client())
	t.Cleanup(func() { _ = c.Close() })
	hctx, err := c.Lock("cli/sentinel").Lock(ctx)
	require.NoError(t, err)
	r := relockCmd(t, "", "--redis", "redis+sentinel://"+strings.Join(s.SentinelAddrs(), ",")+"/"+redistest.MasterName, "inspect", "cli/sentinel")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^Lock\s+holder\s+`+owner(t, c, hctx)+`\s+\S+\s+1\s`, r.stdout)
}

func TestParseTarget(t *testing.T) {
	tg, err := parseTarget("redis://u:p@h1:6379/3")
	require.NoError(t, err)
	require.NotNil(t, tg.single)
	assert.Equal(t, "h1:6379", tg.single.Addr)
	assert.Equal(t, 3, tg.single.DB)
	assert.Equal(t, "p", tg.single.Password)
	assert.Equal(t, "redis://u:xxxxx@h1:6379/3", tg.display)

	tg, err = parseTarget("rediss://h1:6380")
	require.NoError(t, err)
	assert.NotNil(t, tg.single.TLSConfig)

	tg, err = parseTarget("h1:1")
	require.NoError(t, err)
	assert.Equal(t, "h1:1", tg.single.Addr)

	tg, err = parseTarget("h1:1, h2:2,h3:3")
	require.NoError(t, err)
	require.NotNil(t, tg.cluster)
	assert.Equal(t, []string{"h1:1", "h2:2", "h3:3"}, tg.cluster.Addrs)

	tg, err = parseTarget("rediss+cluster://u:p@h1:1,h2:2?dial_timeout=2s")
	require.NoError(t, err)
	require.NotNil(t, tg.cluster)
	assert.ElementsMatch(t, []string{"h1:1", "h2:2"}, tg.cluster.Addrs)
	assert.Equal(t, "u", tg.cluster.Username)
	assert.Equal(t, "p", tg.cluster.Password)
	assert.Equal(t, 2*time.Second, tg.cluster.DialTimeout)
	assert.NotNil(t, tg.cluster.TLSConfig)

	tg, err = parseTarget("redis+sentinel://u:p@s1:26379,s2:26379/mymaster/2?sentinel_password=sp")
	require.NoError(t, err)
	require.NotNil(t, tg.failover)
	assert.Equal(t, "mymaster", tg.failover.MasterName)
	assert.ElementsMatch(t, []string{"s1:26379", "s2:26379"}, tg.failover.SentinelAddrs)
	assert.Equal(t, 2, tg.failover.DB)
	assert.Equal(t, "u", tg.failover.Username)
	assert.Equal(t, "p", tg.failover.Password)
	assert.Equal(t, "sp", tg.failover.SentinelPassword)
	assert.NotContains(t, tg.display, "=sp")
	assert.NotContains(t, tg.display, ":p@")

	for _, bad := range []string{"", "redis+cluster://", "redis+cluster://h1:1/0", "redis+sentinel://s1:1", "h1", "h1:x", "ftp://h"} {
		_, err := parseTarget(bad)
		assert.Error(t, err, bad)
	}
}

// The command honours its context: a Redis that accepts connections and
// never answers costs the caller its context's time, not go-redis's
// timeouts.
func TestCommandHonoursItsContext(t *testing.T) {
	srv := redistest.Start(t)
	srv.Pause()
	t.Cleanup(srv.Resume)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"--redis", "redis://" + srv.Addr(), "inspect", "x"}, strings.NewReader(""), &out, &errb)
	took := time.Since(start)
	assert.Less(t, took, time.Second, "took %v", took)
	assert.NotEqual(t, exitOK, code)
	assert.Contains(t, errb.String(), "cannot reach Redis")
}
