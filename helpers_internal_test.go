package relock

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The test doubles the package's tests share; export_test.go lends the
// ones the external tests need.

// passHook is a go-redis hook that passes everything on: a test's hook
// embeds it and writes only the hooks it watches.
type passHook struct{}

func (passHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (passHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (passHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// evalGate is a go-redis hook that holds single EVALSHA commands (not
// pipelines) until open is closed: a test's hook embeds it to hold calls
// back while it watches the pipelines.
type evalGate struct {
	passHook
	open chan struct{}
}

func newEvalGate() evalGate { return evalGate{open: make(chan struct{})} }

func (g *evalGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			<-g.open
		}
		return next(ctx, cmd)
	}
}

// countingHandler is a slog handler that keeps every record, for tests
// that count what the Client logged.
type countingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// Count returns how many records of level mention substr.
func (h *countingHandler) Count(level slog.Level, substr string) int {
	return h.countIf(func(l slog.Level) bool { return l == level }, substr)
}

// CountAtLeast returns how many records of level or above mention substr.
func (h *countingHandler) CountAtLeast(level slog.Level, substr string) int {
	return h.countIf(func(l slog.Level) bool { return l >= level }, substr)
}

// Mentions returns how many records of any level mention substr.
func (h *countingHandler) Mentions(substr string) int {
	return h.countIf(func(slog.Level) bool { return true }, substr)
}

// Messages returns the messages of the records of level, in order.
func (h *countingHandler) Messages(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Level == level {
			out = append(out, r.Message)
		}
	}
	return out
}

func (h *countingHandler) countIf(level func(slog.Level) bool, substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if level(r.Level) && strings.Contains(r.Message, substr) {
			n++
		}
	}
	return n
}

type lockResult struct {
	ctx context.Context
	err error
	at  time.Time
}

// lockAsync takes l in a goroutine and reports when it got it.
func lockAsync(l *Lock) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		ctx, err := l.Lock(context.Background())
		ch <- lockResult{ctx, err, time.Now()}
	}()
	return ch
}
