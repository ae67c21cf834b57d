//go:build !unix

package relock

import "time"

func ProcessCPU() (time.Duration, bool) { return 0, false }
