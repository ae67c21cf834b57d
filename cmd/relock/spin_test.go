package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// The command knows a SpinLock from its row in relock's table of kinds
// alone: inspect and list show it, force-unlock frees it.
func TestCLISpinLock(t *testing.T) {
	srv := redistest.Start(t)
	d := deployment{url: "redis://" + srv.Addr(), rdb: srv.Client()}
	ctx := context.Background()
	c := d.client(t)
	const name = "cli/spin"
	hctx, err := c.SpinLock(name).Lock(ctx)
	require.NoError(t, err)
	own := owner(t, c, hctx)

	r := d.cmd(t, "", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^SpinLock\s+holder\s+`+own+`\s+\S+\s+1\s+\S+\s+\d+$`, r.stdout)
	r = d.cmd(t, "", "--json", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	assert.Equal(t, []string{"spinlock"}, js.Kinds)
	r = d.cmd(t, "", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^`+name+`\s+SpinLock\s+1\s+0\s`, r.stdout)

	r = d.cmd(t, "", "--yes", "force-unlock", name)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "released SpinLock "+name+" held by "+own+" ("+c.Name()+", 1 hold)\n", r.stdout)
	assert.ErrorIs(t, c.SpinLock(name).Unlock(hctx), relock.ErrLockLost)
}
