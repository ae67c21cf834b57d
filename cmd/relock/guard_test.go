package main

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// force-unlock --owner/--token frees the hold the operator saw, and run
// again, after the lock passed to the next holder, frees nothing: it names
// the holder now and exits 1, with Redis as it was.
func TestForceUnlockGuardFreesOnlyTheHoldSeen(t *testing.T) {
	srv := redistest.Start(t)
	d := deployment{url: "redis://" + srv.Addr(), rdb: srv.Client()}
	ctx := context.Background()
	const name = "cli/guard"
	first := d.client(t)
	h1, err := first.Lock(name).Lock(ctx)
	require.NoError(t, err)
	tok1, err := first.Lock(name).Token(h1)
	require.NoError(t, err)
	seen := []string{"--owner", owner(t, first, h1), "--token", strconv.FormatInt(tok1, 10)}

	r := d.cmd(t, "", append([]string{"--yes", "force-unlock", name}, seen...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "released Lock "+name+" held by "+owner(t, first, h1))
	select {
	case <-h1.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder was not told")
	}
	assert.ErrorIs(t, context.Cause(h1), relock.ErrForceUnlocked)

	next := d.client(t, relock.WithName("next-proc"))
	h2, err := next.Lock(name).Lock(ctx)
	require.NoError(t, err)
	nextOwner := owner(t, next, h2)
	for _, guard := range [][]string{seen, seen[:2], seen[2:]} {
		before := srv.Client().HGetAll(ctx, "relock:{"+name+"}").Val()
		r = d.cmd(t, "", append([]string{"--yes", "force-unlock", name}, guard...)...)
		assert.Equal(t, 1, r.code, "%v: %s", guard, r.stdout)
		assert.Contains(t, r.stderr, nextOwner+" (next-proc, 1 hold)", "%v: the refusal names the holder now, with its Client", guard)
		assert.Contains(t, r.stderr, "nothing released", guard)
		assert.Equal(t, before, srv.Client().HGetAll(ctx, "relock:{"+name+"}").Val(), "%v changed Redis", guard)
		require.NoError(t, h2.Err(), "%v: the next holder keeps the lock", guard)
	}

	r = d.cmd(t, "", append([]string{"--json", "--yes", "force-unlock", name}, seen[:2]...)...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, nextOwner)

	r = d.cmd(t, "", "--json", "--yes", "force-unlock", name, "--owner", nextOwner)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonForce
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.Len(t, js.Released, 1)
	assert.Equal(t, nextOwner, js.Released[0].Holders[0].Owner)
}
