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

// Pause stops redis-server (SIGSTOP): its connections stay open and the
// kernel still accepts new ones, but nothing answers — a hung Redis.
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused redis-server (SIGCONT).
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }
