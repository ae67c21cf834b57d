package relock

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// relock loads its scripts by SCRIPT LOAD, not by EVAL: Redis 7.4 evicts
// the scripts EVAL loaded beyond the last 500, so a neighbour's EVALs
// would push relock's out and cost its calls a NOSCRIPT round trip each.
// Both ways a call runs a script are checked: alone (run) and in a
// pipeline (evalPipeline: the watchdog's renewals, Inspect).
func TestScriptsStayLoadedPastOtherEvals(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	loads := func() int64 {
		calls, err := redistest.CommandCalls(ctx, rdb)
		require.NoError(t, err)
		return calls["script|load"] + calls["script"] // Redis 6.2 counts subcommands as "script"
	}
	before := loads()

	l := c.Lock("loaded")
	hctx, err := l.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(hctx))
	ks, err := newKeyspace(c.opts.prefix, "loaded")
	require.NoError(t, err)
	replies, _ := c.evalPipeline(ctx, "inspect", []scriptCall{inspectCall(ks)})
	require.NoError(t, replies[0].Err())
	assert.GreaterOrEqual(t, loads()-before, int64(3), "acquire, release and inspect loaded by SCRIPT LOAD")

	for i := range 600 {
		require.NoError(t, rdb.Eval(ctx, "return "+strconv.Itoa(i), nil).Err())
	}
	exists, err := rdb.ScriptExists(ctx, lockAcquireScript.Hash(), lockReleaseScript.Hash(), inspectScript.Hash()).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, true}, exists, "still loaded after 600 other scripts' EVALs")
}
