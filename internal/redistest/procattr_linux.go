package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server die with the test binary, even when the
// binary is killed (go test -timeout) before its cleanups can run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
