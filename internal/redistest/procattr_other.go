//go:build !linux

package redistest

import "os/exec"

// dieWithParent has no portable equivalent outside Linux: a killed test
// binary leaves its servers behind there.
func dieWithParent(*exec.Cmd) {}
