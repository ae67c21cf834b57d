package main

import (
	"context"
	"encoding/json"
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
	assert.Regexp(t, `^Semaphore\s+holder\s+`+holder+`\s+2/3\s+[0-9.]+m?s\s+-$`, lines[1])
	assert.Regexp(t, `^Semaphore\s+queued #1\s+\S+\s+3/3\s+[0-9.]+m?s\s+-$`, lines[2])

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
	assert.Regexp(t, `(?m)^`+name+`\s+Semaphore\s+1\s+1\s+[0-9.]+m?s\s+-$`, r.stdout)

	require.NoError(t, s.Release(h))
	require.NoError(t, <-waiting)
}
