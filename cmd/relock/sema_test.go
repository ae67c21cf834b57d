package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
)

// A Semaphore's holders (with their permits) and waiters (with the permits
// they ask for), as inspect and list show them.
func testSemaphore(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t, relock.WithKeyPrefix("clisema"))
	name := "sema-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s := c.Semaphore(name, 3)
	h, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	holder := owner(t, c, h)
	waiting := make(chan error, 1)
	go func() {
		_, err := d.client(t, relock.WithKeyPrefix("clisema")).Semaphore(name, 3).Acquire(ctx, 3)
		waiting <- err
	}()
	require.Eventually(t, func() bool { st, err := s.State(ctx); return err == nil && st.Waiters == 1 }, 5*time.Second, 5*time.Millisecond)

	r := d.cmd(t, "", "--prefix", "clisema", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^Semaphore\s+holder\s+`+holder+`\s+\S+\s+2/3\s+[0-9.]+m?s\s+-$`, lines[1])
	assert.Regexp(t, `^Semaphore\s+queued #1\s+\S+\s+\S+\s+3/3\s+[0-9.]+m?s\s+-$`, lines[2])

	r = d.cmd(t, "", "--prefix", "clisema", "--json", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	assert.Equal(t, []string{"semaphore"}, js.Kinds)
	require.NotNil(t, js.Semaphore)
	assert.Equal(t, 3, js.Semaphore.Permits)
	assert.Equal(t, 2, js.Semaphore.Used)
	require.Len(t, js.Semaphore.Holders, 1)
	assert.Equal(t, holder, js.Semaphore.Holders[0].Owner)
	assert.Equal(t, []int{3}, js.Semaphore.WaiterPermits)

	r = d.cmd(t, "", "--prefix", "clisema", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^`+name+`\s+Semaphore\s+1\s+1\s+[0-9.]+m?s\s+-\s+-\s+`+regexp.QuoteMeta(holder+" ("+c.Name()+")")+`$`, r.stdout)

	require.NoError(t, s.Release(h))
	require.NoError(t, <-waiting)
}

// testWatchSemaphore: watch shows a Semaphore's permits handed over by a
// release, then the release that frees it. A Semaphore publishes nothing
// watch may listen to (its only channels are the waiting Clients', where
// PUBLISH's receiver count decides a hand-over), so the re-read shows it.
func testWatchSemaphore(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t)
	name := "cli/watchsema-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	h, err := c.Semaphore(name, 2).Acquire(ctx, 2)
	require.NoError(t, err)
	w := d.client(t)
	acquired := make(chan context.Context, 1)
	go func() {
		wctx, err := w.Semaphore(name, 2).Acquire(ctx, 1)
		assert.NoError(t, err)
		acquired <- wctx
	}()
	require.Eventually(t, func() bool {
		st, err := c.Semaphore(name, 2).State(ctx)
		return err == nil && st.Waiters == 1
	}, 5*time.Second, 5*time.Millisecond)

	out, code := startWatch(t, d, "queued #1", name, "--for", "3s", "--refresh", "100ms")
	require.NoError(t, c.Semaphore(name, 2).Release(h))
	wctx := <-acquired
	handed := `(?m)^-- [0-9:.]+ changed\nKIND\s+ROLE.*\nSemaphore\s+holder\s+` + owner(t, w, wctx) + `\s+\S+\s+1/2\s`
	require.Eventually(t, func() bool { return regexp.MustCompile(handed).MatchString(out.String()) },
		5*time.Second, 5*time.Millisecond, "watch shows the hand-over: %s", out.String())
	require.NoError(t, w.Semaphore(name, 2).Release(wctx))
	assert.Equal(t, 0, <-code)
	t.Logf("\n%s", out.String())
	assert.Regexp(t, `(?m)^-- [0-9:.]+ changed\nno lock `+name+`$`, out.String())
}

// testLatch: inspect and list show a closed CountDownLatch's count, and
// watch shows each CountDown: the one that opens it by its message (the
// slow re-read is far away), the others at the re-read.
func testLatch(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t, relock.WithKeyPrefix("clilatch"))
	name := "latch-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	l := c.CountDownLatch(name)
	set, err := l.TrySetCount(ctx, 3)
	require.NoError(t, err)
	require.True(t, set)

	r := d.cmd(t, "", "--prefix", "clilatch", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	assert.Regexp(t, `(?m)^CountDownLatch\s+closed\s+-\s+-\s+3\s+-\s+-$`, r.stdout)
	r = d.cmd(t, "", "--prefix", "clilatch", "--json", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	assert.Equal(t, []string{"countdownlatch"}, js.Kinds)
	require.NotNil(t, js.Latch)
	assert.Equal(t, jsonLatch{Key: l.Key(), Count: 3}, *js.Latch)

	r = d.cmd(t, "", "--prefix", "clilatch", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^`+name+`\s+CountDownLatch\s+0\s+0\s+-\s+-\s+3\s+-$`, r.stdout)
	r = d.cmd(t, "", "--prefix", "clilatch", "--json", "list")
	require.Equal(t, 0, r.code, r.stderr)
	var sums []jsonSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sums))
	assert.Equal(t, []jsonSummary{{Name: name, Kind: "countdownlatch", Owners: []jsonOwner{}, Count: 3}}, sums)

	out, code := startWatch(t, d, "closed", "--prefix", "clilatch", name, "--for", "1500ms", "--refresh", "100ms")
	require.NoError(t, l.CountDown(ctx))
	assert.Equal(t, 0, <-code)
	t.Logf("\n%s", out.String())
	assert.Regexp(t, `(?m)^-- [0-9:.]+ changed\nKIND\s+ROLE.*\nCountDownLatch\s+closed\s+-\s+-\s+2\s`, out.String())

	require.NoError(t, l.CountDown(ctx))
	out, code = startWatch(t, d, "closed", "--prefix", "clilatch", name, "--for", "1500ms", "--refresh", "1h")
	require.NoError(t, l.CountDown(ctx))
	assert.Equal(t, 0, <-code)
	t.Logf("\n%s", out.String())
	assert.Regexp(t, `(?m)^-- [0-9:.]+ message "all" on clilatch:\{`+name+`\}:latch:ch\nno lock `+name+`$`, out.String())
}

// testForceSemaphore: force-unlock frees every permit of a Semaphore,
// whoever holds them: the holders' contexts learn the loss (here at their
// next renewal, in another Client) and the queued waiter is handed the
// permits.
func testForceSemaphore(t *testing.T, d deployment) {
	ctx := context.Background()
	name := "cli/forcesema-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c := d.client(t, relock.WithWatchdogLease(900*time.Millisecond))
	s := c.Semaphore(name, 3)
	h1, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	h2, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	waiter := d.client(t)
	type acquired struct {
		ctx context.Context
		err error
	}
	got := make(chan acquired, 1)
	wait, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() {
		wctx, err := waiter.Semaphore(name, 3).Acquire(wait, 3)
		got <- acquired{wctx, err}
	}()
	require.Eventually(t, func() bool { st, err := s.State(ctx); return err == nil && st.Waiters == 1 }, 5*time.Second, 5*time.Millisecond)

	r := d.cmd(t, "n\n", "force-unlock", name)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "not confirmed; nothing released")
	st, err := s.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, relock.SemaphoreState{Permits: 3, Used: 3, Holds: 2, Waiters: 1}, st)

	r = d.cmd(t, "", "--yes", "force-unlock", name)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	assert.Regexp(t, `^released Semaphore `+name+` held by \S+ \(\S+, \d permits?\), \S+ \(\S+, \d permits?\); 1 queued waiter may take the permits\n$`, r.stdout)
	assert.Contains(t, r.stdout, owner(t, c, h1)+" ("+c.Name()+", 2 permits)")
	assert.Contains(t, r.stdout, owner(t, c, h2)+" ("+c.Name()+", 1 permit)")
	for _, h := range []context.Context{h1, h2} {
		select {
		case <-h.Done():
			assert.ErrorIs(t, context.Cause(h), relock.ErrLockLost)
		case <-time.After(5 * time.Second):
			t.Fatal("a holder did not learn it lost its permits")
		}
	}
	var wctx context.Context
	select {
	case a := <-got:
		require.NoError(t, a.err)
		wctx = a.ctx
	case <-time.After(5 * time.Second):
		t.Fatal("the queued waiter was not handed the permits")
	}
	st, err = s.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, relock.SemaphoreState{Permits: 3, Used: 3, Holds: 1}, st)
	assert.ErrorIs(t, s.Release(h1), relock.ErrLockLost)
	require.NoError(t, waiter.Semaphore(name, 3).Release(wctx))

	// --json
	h3, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	r = d.cmd(t, "", "--json", "--yes", "force-unlock", name)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonForce
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.Len(t, js.Released, 1)
	assert.Equal(t, "semaphore", js.Released[0].Kind)
	require.Len(t, js.Released[0].Holders, 1)
	assert.Equal(t, owner(t, c, h3), js.Released[0].Holders[0].Owner)
	assert.Equal(t, 1, js.Released[0].Holders[0].Count)
	<-h3.Done()
	assert.ErrorIs(t, s.Release(h3), relock.ErrLockLost)
	st, err = s.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, relock.SemaphoreState{Permits: 3}, st)
}

// testForceLatch: force-unlock refuses a closed CountDownLatch — opening
// it would tell its waiters the work is done — with a non-zero exit and
// nothing changed, unless --delete-latch says to delete it.
func testForceLatch(t *testing.T, d deployment) {
	ctx := context.Background()
	name := "cli/forcelatch-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c := d.client(t)
	l := c.CountDownLatch(name)
	set, err := l.TrySetCount(ctx, 2)
	require.NoError(t, err)
	require.True(t, set)
	hctx, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)

	for _, json := range []bool{false, true} {
		args := []string{"--yes", "force-unlock", name}
		if json {
			args = append([]string{"--json"}, args...)
		}
		r := d.cmd(t, "", args...)
		assert.Equal(t, 1, r.code)
		assert.Empty(t, r.stdout)
		assert.Equal(t, "relock: "+name+" is a closed CountDownLatch (count 2); force-unlock does not open a latch: pass --delete-latch to delete it; nothing released\n", r.stderr)
		n, err := l.Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		held, err := c.Lock(name).HoldCount(hctx)
		require.NoError(t, err)
		assert.Equal(t, 1, held, "nothing is released when the latch is refused")
	}

	r := d.cmd(t, "", "--yes", "--delete-latch", "force-unlock", name)
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	assert.Contains(t, r.stdout, "released Lock "+name+" held by "+owner(t, c, hctx)+" ("+c.Name()+", 1 hold)\n")
	assert.Contains(t, r.stdout, "deleted CountDownLatch "+name+" (count 2)\n")
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	st, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.False(t, st.Exists())

	// --json: the deleted latch with its count.
	set, err = l.TrySetCount(ctx, 4)
	require.NoError(t, err)
	require.True(t, set)
	r = d.cmd(t, "", "--json", "--yes", "--delete-latch", "force-unlock", name)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonForce
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	assert.Equal(t, jsonForce{Name: name, Released: []jsonReleased{{Kind: "countdownlatch", Holders: []jsonHolder{}, Count: 4}}}, js)
	n, err = l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
}
