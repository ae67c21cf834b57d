package relock_test

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// Limits of the path from an uncontended Lock.Lock to its EVALSHA: how many
// calls deep relock's code sends it, and in how many files of the engine
// (the files of Lock's own type, lock.go, aside) those calls are.
const (
	lockPathFrames      = 10
	lockPathEngineFiles = 3
)

// TestLockReachesItsScriptInFewFrames keeps the engine's path short: an
// uncontended Lock.Lock reaches go-redis with its EVALSHA in at most
// lockPathFrames calls of relock's, over at most lockPathEngineFiles files
// besides lock.go. A reader follows a Lock to Redis in a few steps.
func TestLockReachesItsScriptInFewFrames(t *testing.T) {
	bk := newReal(t)
	hook := &callersHook{}
	bk.rdb.AddHook(hook)
	c := bk.newClient(t)
	l := c.Lock("path")
	held, err := l.Lock(context.Background()) // loads the script
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(held); err != nil {
		t.Fatal(err)
	}
	hook.arm()
	held, err = l.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(held) }()
	frames := hook.path()
	var files []string
	for _, f := range frames {
		t.Logf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line)
		if base := filepath.Base(f.File); base != "lock.go" && !slices.Contains(files, base) {
			files = append(files, base)
		}
	}
	t.Logf("%d frames; engine files %v", len(frames), files)
	if len(frames) == 0 {
		t.Fatal("no EVALSHA was sent from a Lock call")
	}
	if len(frames) > lockPathFrames || len(files) > lockPathEngineFiles {
		t.Fatalf("Lock.Lock reaches its EVALSHA in %d frames over %d engine files %v; want at most %d and %d",
			len(frames), len(files), files, lockPathFrames, lockPathEngineFiles)
	}
}

// callersHook records, once armed, the stack of the first EVALSHA sent.
type callersHook struct {
	relock.PassHook
	mu    sync.Mutex
	armed bool
	pcs   []uintptr
}

func (h *callersHook) arm() {
	h.mu.Lock()
	h.armed, h.pcs = true, nil
	h.mu.Unlock()
}

func (h *callersHook) record() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed {
		h.armed = false
		h.pcs = make([]uintptr, 64)
		h.pcs = h.pcs[:runtime.Callers(3, h.pcs)]
	}
}

func (h *callersHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.record()
		}
		return next(ctx, cmd)
	}
}

func (h *callersHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "evalsha" {
			h.record()
		}
		return next(ctx, cmds)
	}
}

// path is relock's frames of the recorded stack, from Lock.Lock to the last
// call of relock's before go-redis, outermost first (inlined calls count).
func (h *callersHook) path() []runtime.Frame {
	h.mu.Lock()
	pcs := h.pcs
	h.mu.Unlock()
	var all []runtime.Frame
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		all = append(all, f)
		if !more {
			break
		}
	}
	const pkg = "github.com/relock-go/relock."
	var out []runtime.Frame
	inside := false
	for i := len(all) - 1; i >= 0; i-- { // outermost first
		f := all[i]
		if f.Function == pkg+"(*Lock).Lock" {
			inside = true
		}
		if !inside {
			continue
		}
		if !strings.HasPrefix(f.Function, pkg) {
			break // go-redis
		}
		out = append(out, f)
	}
	return out
}
