package relock

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gateHook holds every single script command (not pipelines) until open is
// closed, and records the size of every pipeline.
type gateHook struct {
	open  chan struct{}
	mu    sync.Mutex
	sizes []int
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			<-h.open
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.sizes = append(h.sizes, len(cmds))
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

var echoScript = redis.NewScript(`
if ARGV[1] == 'fail' then
	return redis.error_reply('ERR asked to fail')
end
return ARGV[1]`)

// Calls queued behind the sends in flight leave in batches no larger than
// coalesceMaxBatch, each call gets its own reply or error (an error reply
// fails that call only), and a batch of scripts the server does not know
// yet (NOSCRIPT) is loaded and sent again.
func TestCoalescedBatchesAreBoundedAndRepliesPerCall(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, echoScript.Load(context.Background(), rdb).Err())
	h := &gateHook{open: make(chan struct{})}
	rdb.AddHook(h)
	var co coalescer
	ctx := context.Background()
	call := func(arg string) scriptCall {
		return scriptCall{script: echoScript, keys: []string{"k"}, args: []any{arg}}
	}

	const queued = 3*coalesceMaxBatch + 5
	var wg sync.WaitGroup
	for i := range coalesceInFlight { // they take the send tokens, held at the gate
		wg.Go(func() {
			v, err := co.run(ctx, rdb, call(fmt.Sprint("first", i))).Text()
			assert.NoError(t, err)
			assert.Equal(t, fmt.Sprint("first", i), v)
		})
	}
	waitFor(&co, func() bool { return co.inFlight == coalesceInFlight })
	require.NoError(t, rdb.ScriptFlush(ctx).Err(), "the queued calls will meet NOSCRIPT")
	for i := range queued {
		wg.Go(func() {
			arg := fmt.Sprint(i)
			if i%7 == 3 {
				arg = "fail"
			}
			v, err := co.run(ctx, rdb, call(arg)).Text()
			if arg == "fail" {
				assert.ErrorContains(t, err, "asked to fail", "call %d", i)
				return
			}
			assert.NoError(t, err, "call %d", i)
			assert.Equal(t, arg, v, "call %d gets its own reply", i)
		})
	}
	waitFor(&co, func() bool { return len(co.queue) == queued })
	close(h.open)
	wg.Wait()
	assert.Zero(t, co.inFlight, "every token is back")
	assert.Empty(t, co.queue)
	total := 0
	for _, n := range h.sizes {
		assert.LessOrEqual(t, n, coalesceMaxBatch)
		total += n
	}
	t.Logf("pipelines: %v", h.sizes)
	assert.GreaterOrEqual(t, len(h.sizes), 4, "%d queued calls leave in at least 4 batches", queued)
	assert.Greater(t, total, queued, "EVALSHA then EVAL for the scripts the server forgot")
}

// waitFor yields until cond, read under the coalescer's lock, holds.
func waitFor(co *coalescer, cond func() bool) {
	for {
		co.mu.Lock()
		ok := cond()
		co.mu.Unlock()
		if ok {
			return
		}
		runtime.Gosched()
	}
}
