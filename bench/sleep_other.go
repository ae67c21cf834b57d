//go:build !linux

package bench

import (
	"context"
	"runtime"
	"time"
)

// pollSleep sleeps d between two polls of the floor, or returns ctx's error
// (see sleep_linux.go; elsewhere, a Go timer).
func pollSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// kernelSleep spends d: elsewhere than on Linux, spinning (yielding to other
// goroutines), since a Go timer may sleep much longer than a short d.
func kernelSleep(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
		runtime.Gosched()
	}
}
