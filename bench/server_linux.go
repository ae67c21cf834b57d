package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill redis-server when the benchmark dies
// without running its deferred Stop (SIGKILL, a crash), so that no server
// is left behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
