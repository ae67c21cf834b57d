//go:build !linux

package bench

import "os/exec"

// dieWithParent has no portable counterpart outside Linux: there, a killed
// benchmark leaves its redis-server to be stopped by hand.
func dieWithParent(*exec.Cmd) {}
