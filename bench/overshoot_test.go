package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// overshootSlack bounds how late relock's Lock may return after its
// deadline under any fault: its documented slack (scheduling, at most 50 ms
// for leaving a queue), doubled and more for a shared, loaded machine,
// against go-redis's own timeouts of 3 s and more.
const overshootSlack = 250 * time.Millisecond

// The CI smoke run of the overshoot measurement: two trials per fault and
// library. relock must return by its deadline plus the slack under every
// fault, saying ErrNotObtained (or having obtained the lock on a new
// connection, behind a half-open one), and leave nothing held once Redis
// is back.
func TestOvershootUnderEveryFault(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	refused, err := RefusedAddr()
	require.NoError(t, err)

	cfg := OvershootConfig{Trials: 2, Parallel: 2, Deadline: 300 * time.Millisecond, Delay: time.Second, Libs: OvershootLibraries()}
	faults := Faults(srv, proxy, refused, cfg.Delay)
	res, err := RunOvershoot(context.Background(), cfg, faults)
	require.NoError(t, err)
	require.Len(t, res, len(faults)*len(cfg.Libs))
	for _, r := range res {
		require.Len(t, r.Trials, cfg.Trials, "%s, %s", r.Library, r.Fault)
		if r.Library != "relock" {
			continue
		}
		for _, tr := range r.Trials {
			assert.LessOrEqual(t, tr.Overshoot, overshootSlack, "relock, %s: returned %v after its deadline", r.Fault, tr.Overshoot)
			if tr.Class == "obtained" && strings.HasPrefix(r.Fault, "half-open") {
				// go-redis (relock's bounded clone of the default client) cut
				// the blackholed read and retried on a new connection,
				// which works: obtained by the deadline.
				continue
			}
			assert.True(t, strings.HasPrefix(tr.Class, "ErrNotObtained+ErrUnavailable"), "relock, %s: %s", r.Fault, tr.Class)
			assert.False(t, tr.LeftHeld, "relock, %s: a lock whose Lock failed is held after recovery", r.Fault)
		}
	}
	var b strings.Builder
	WriteOvershootTable(&b, res)
	assert.Equal(t, 2+len(res), strings.Count(b.String(), "\n"), "header, separator and a row per fault and library")
}
