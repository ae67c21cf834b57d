package bench

import (
	"context"
	"syscall"
	"time"
)

// pollSleep sleeps d between two polls of the floor, or returns ctx's error.
//
// It sleeps in the kernel, not on a Go timer. The benchmark's "processes"
// share one Go runtime, which, when idle, waits for its next timer in
// epoll_wait with a timeout rounded up to whole milliseconds and then fires
// every timer that is due: the floor's sub-millisecond-spaced pollers would
// all wake together on those ticks, and its hand-off would be ~1 ms, not the
// 1 ms ÷ N of N real processes whose sleeps are independent. A blocked
// nanosleep per poller (an OS thread each, as separate processes would have)
// keeps them independent; it overshoots by the kernel's timer slack, as a
// Go timer in a process of its own does.
func pollSleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	kernelSleep(d)
	return ctx.Err()
}

// kernelSleep blocks its goroutine's thread in nanosleep for d: precise to
// the kernel's timer slack (~50 µs), where a Go timer of less than 1 ms
// sleeps about 1 ms when the runtime is idle.
func kernelSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
