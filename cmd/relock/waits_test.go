package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// inspect shows, next to a holder, the lock its owner waits for, on a
// single Redis and on a Cluster, where the wait record sits in a slot of
// its own.
func TestCLIInspectShowsWhatAHolderWaitsFor(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		testInspectWaits(t, deployment{url: "redis://" + srv.Addr(), rdb: srv.Client()})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3, 0)
		testInspectWaits(t, deployment{url: strings.Join(cl.Addrs(), ","), rdb: cl.Client()})
	})
}

func testInspectWaits(t *testing.T, d deployment) {
	a := d.client(t, relock.WithDeadlockDetection(100*time.Millisecond))
	b := d.client(t)
	hb, err := b.Lock("cli/w-2").Lock(context.Background())
	require.NoError(t, err)
	ha, err := a.Lock("cli/w-1").Lock(relock.NewOwner(context.Background()))
	require.NoError(t, err)
	own := owner(t, a, ha)

	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ha, 10*time.Second)
		defer cancel()
		h2, err := a.Lock("cli/w-2").Lock(ctx)
		if err == nil {
			err = a.Lock("cli/w-2").Unlock(h2)
		}
		got <- err
	}()
	line := regexp.MustCompile(`(?m)^Lock\s+holder\s+` + regexp.QuoteMeta(own) + `\s+\S+\s+1\s+\S+\s+\S+\s+waits for lock cli/w-2 since [0-9.]+m?s$`)
	var r result
	ok := assert.Eventually(t, func() bool {
		r = d.cmd(t, "", "inspect", "cli/w-1")
		require.Equal(t, 0, r.code, r.stderr)
		return line.MatchString(r.stdout)
	}, 3*time.Second, 20*time.Millisecond, "the wait shows next to its holder")
	t.Logf("\n%s", r.stdout)
	require.True(t, ok)

	r = d.cmd(t, "", "--json", "inspect", "cli/w-1")
	require.Equal(t, 0, r.code, r.stderr)
	var js jsonState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &js))
	require.NotNil(t, js.Lock)
	require.Len(t, js.Lock.Holders, 1)
	w := js.Lock.Holders[0].WaitsFor
	require.NotNil(t, w, r.stdout)
	assert.Equal(t, "lock", w.Kind)
	assert.Equal(t, "cli/w-2", w.Name)
	assert.WithinDuration(t, time.Now(), w.Since, 5*time.Second)

	r = d.cmd(t, "", "inspect", "cli/w-2")
	assert.NotContains(t, r.stdout, "waits for", "B waits for nothing")

	require.NoError(t, b.Lock("cli/w-2").Unlock(hb))
	require.NoError(t, <-got)
	r = d.cmd(t, "", "--json", "inspect", "cli/w-1")
	assert.NotContains(t, r.stdout, "waits_for", "the wait ended")
	require.NoError(t, a.Lock("cli/w-1").Unlock(ha))
}
