package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The watch command: a lock's state printed again at every change.

// startWatch runs watch in the background and waits for its first print.
func startWatch(t *testing.T, d deployment, want string, args ...string) (*syncBuffer, <-chan int) {
	t.Helper()
	out, errb := &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), append([]string{"--redis", d.url, "watch"}, args...), strings.NewReader(""), out, errb)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), want) }, 5*time.Second, 5*time.Millisecond,
		"watch printed %q, stderr %q", out.String(), errb.String())
	return out, code
}

func testWatchRelease(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t)
	const name = "cli/watch"
	hctx, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)
	own := owner(t, c, hctx)

	// The slow refresh is far away: only the unlock's message can show it.
	out, code := startWatch(t, d, own, name, "--for", "1500ms", "--refresh", "1h")
	require.NoError(t, c.Lock(name).Unlock(hctx))
	select {
	case got := <-code:
		assert.Equal(t, 0, got)
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not stop after --for")
	}
	t.Logf("\n%s", out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 5)
	assert.Regexp(t, `^-- [0-9:.]+ watching `+name+` on `, lines[0])
	assert.Regexp(t, `^KIND\s+ROLE`, lines[1])
	assert.Regexp(t, `^Lock\s+holder\s+`+own, lines[2])
	assert.Regexp(t, `^-- [0-9:.]+ message "all" on relock:\{`+name+`\}:ch$`, lines[3])
	assert.Equal(t, "no lock "+name, lines[4])

	// --json: one object per line.
	hctx, err = c.Lock(name).Lock(ctx)
	require.NoError(t, err)
	out, code = startWatch(t, d, `"event":"start"`, name, "--for", "1s", "--json")
	require.NoError(t, c.Lock(name).Unlock(hctx))
	assert.Equal(t, 0, <-code)
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	var ev [2]jsonEvent
	for i := range ev {
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &ev[i]))
	}
	assert.Equal(t, "start", ev[0].Event)
	assert.True(t, ev[0].State.Exists)
	assert.Equal(t, "message", ev[1].Event)
	assert.Equal(t, "relock:{"+name+"}:ch", ev[1].Channel)
	assert.False(t, ev[1].State.Exists)
}

// testWatchFair: watch marks the FairLock's hold, so its release announces
// the hand-over to the next waiter on the lock's channel (a sharded one on a
// Cluster), and the new holder shows up right after. Watch never listens on
// the waiters' own channels, where it would make a dead waiter look alive.
func testWatchFair(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t)
	const name = "cli/watchfair"
	hctx, err := c.FairLock(name).Lock(ctx)
	require.NoError(t, err)
	w := d.client(t)
	acquired := make(chan context.Context, 1)
	go func() {
		wctx, err := w.FairLock(name).Lock(ctx)
		assert.NoError(t, err)
		acquired <- wctx
	}()
	require.Eventually(t, func() bool {
		st, err := c.Inspect(ctx, name)
		return err == nil && st.FairLock != nil && len(st.FairLock.Waiters) == 1
	}, 5*time.Second, 10*time.Millisecond)

	out, code := startWatch(t, d, "queued #1", name, "--for", "1500ms", "--refresh", "1h")
	require.NoError(t, c.FairLock(name).Unlock(hctx))
	wctx := <-acquired
	assert.Equal(t, 0, <-code)
	t.Logf("\n%s", out.String())
	assert.Regexp(t, `(?m)^-- [0-9:.]+ message "handed" on relock:\{`+name+`\}:fair:ch$`, out.String())
	assert.Regexp(t, `(?m)^FairLock\s+holder\s+`+owner(t, w, wctx)+`\s`, out.String())
	require.NoError(t, w.FairLock(name).Unlock(wctx))
}

// testWatchLeaseExpiry: a lease that runs out publishes nothing; the slow
// refresh shows it.
func testWatchExpiry(t *testing.T, d deployment) {
	ctx := context.Background()
	c := d.client(t)
	const name = "cli/watchexpiry"
	hctx, err := c.Lock(name).TryLock(ctx, 0, 400*time.Millisecond)
	require.NoError(t, err)
	out, code := startWatch(t, d, owner(t, c, hctx), name, "--for", "1500ms", "--refresh", "100ms")
	assert.Equal(t, 0, <-code)
	t.Logf("\n%s", out.String())
	assert.Regexp(t, `(?m)^-- [0-9:.]+ changed\nno lock `+name+`$`, out.String())
	assert.NotContains(t, out.String(), "message")
}
