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

// The list command: every lock under a prefix, its kind, holders and waiters.

func testList(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t, relock.WithKeyPrefix("clilist"), relock.WithName("jobs-worker"))
	a, err := c.Lock("jobs/a").Lock(ctx)
	require.NoError(t, err)
	var permits []context.Context // four owners: the table shows three
	for range 4 {
		p, err := c.Semaphore("other/s", 4).Acquire(ctx, 1)
		require.NoError(t, err)
		permits = append(permits, p)
	}
	b, err := c.FairLock("jobs/b").Lock(ctx)
	require.NoError(t, err)
	x, err := c.RWLock("other/x").ReadLock().Lock(ctx)
	require.NoError(t, err)
	tokA, err := c.Lock("jobs/a").Token(a)
	require.NoError(t, err)

	r := d.cmd(t, "", "--prefix", "clilist", "list")
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 5)
	named := func(ctx context.Context) string { return regexp.QuoteMeta(owner(t, c, ctx) + " (jobs-worker)") }
	assert.Regexp(t, `^NAME\s+KIND\s+HOLDERS\s+WAITERS\s+EXPIRES IN\s+TOKEN\s+COUNT\s+OWNERS$`, lines[0])
	assert.Regexp(t, `^jobs/a\s+Lock\s+1\s+0\s+[0-9.]+m?s\s+`+strconv.FormatInt(tokA, 10)+`\s+-\s+`+named(a)+`$`, lines[1])
	assert.Regexp(t, `^jobs/b\s+FairLock\s+1\s+0\s.*\s`+named(b)+`$`, lines[2])
	assert.Regexp(t, `^other/s\s+Semaphore\s+4\s+0\s.*\s\S+ \(jobs-worker\), \S+ \(jobs-worker\), \S+ \(jobs-worker\), \+1 more$`, lines[3])
	assert.Regexp(t, `^other/x\s+RWLock\s+1\s+0\s+[0-9.]+m?s\s+-\s+-\s+`+named(x)+`$`, lines[4])

	r = d.cmd(t, "", "--prefix", "clilist", "list", "jobs/*")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 3)
	assert.NotContains(t, r.stdout, "other/x")

	r = d.cmd(t, "", "--prefix", "clilist", "--json", "list", "jobs/?")
	require.Equal(t, 0, r.code, r.stderr)
	var js []jsonSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.Len(t, js, 2)
	assert.Equal(t, "jobs/a", js[0].Name)
	assert.Equal(t, "lock", js[0].Kind)
	assert.Equal(t, tokA, js[0].Token)
	assert.Equal(t, "fairlock", js[1].Kind)
	assert.Equal(t, []jsonOwner{{Owner: owner(t, c, a), Name: "jobs-worker"}}, js[0].Owners)

	r = d.cmd(t, "", "--prefix", "clilist", "--json", "list", "other/s")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.Len(t, js, 1)
	assert.Len(t, js[0].Owners, 4, "--json lists every owner")

	r = d.cmd(t, "", "--prefix", "clilist", "list", "nothing*")
	assert.Equal(t, result{code: 0, stdout: "no locks match nothing*\n"}, r)
	r = d.cmd(t, "", "--prefix", "clilist", "--json", "list", "nothing*")
	assert.Equal(t, result{code: 0, stdout: "[]\n"}, r)

	require.NoError(t, c.Lock("jobs/a").Unlock(a))
	require.NoError(t, c.FairLock("jobs/b").Unlock(b))
	require.NoError(t, c.RWLock("other/x").ReadLock().Unlock(x))
	for _, p := range permits {
		require.NoError(t, c.Semaphore("other/s", 4).Release(p))
	}
	r = d.cmd(t, "", "--prefix", "clilist", "list")
	assert.Equal(t, result{code: 0, stdout: "no locks\n"}, r)
}

// testListLockWaiters: a Lock's waiters queue in its hash (fields ~q, ~#, ~@), not
// in a key of their own as a FairLock's do; list and force-unlock count them
// as inspect shows them.
func testListLockWaiters(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t, relock.WithKeyPrefix("cliq"))
	const name = "jobs/queued"
	hctx, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)
	w := d.client(t, relock.WithKeyPrefix("cliq"))
	done := make(chan error, 1)
	go func() {
		wctx, err := w.Lock(name).Lock(ctx)
		if err == nil {
			err = w.Lock(name).Unlock(wctx)
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		st, err := c.Inspect(ctx, name)
		return err == nil && st.Lock != nil && len(st.Lock.Queued) == 1
	}, 5*time.Second, 10*time.Millisecond, "the waiter queues")

	r := d.cmd(t, "", "--prefix", "cliq", "list")
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("\n%s", r.stdout)
	assert.Regexp(t, `(?m)^jobs/queued\s+Lock\s+1\s+1\s`, r.stdout)
	r = d.cmd(t, "", "--prefix", "cliq", "--json", "list")
	require.Equal(t, 0, r.code, r.stderr)
	var js []jsonSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.Len(t, js, 1)
	assert.Equal(t, 1, js[0].Waiters)

	r = d.cmd(t, "", "--prefix", "cliq", "--yes", "force-unlock", name)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "woke the first of 1 queued waiters")
	require.NoError(t, <-done, "the waiter is handed the lock")
	assert.ErrorIs(t, c.Lock(name).Unlock(hctx), relock.ErrLockLost)
}
