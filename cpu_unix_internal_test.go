//go:build unix

package relock

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time (user + system) the test process has used
// (exported for the black-box benchmarks).
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
