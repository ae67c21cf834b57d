//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

// dieWithParent has no portable counterpart outside Linux: there, a killed
// benchmark leaves its redis-server to be stopped by hand.
func dieWithParent(*exec.Cmd) {}

// Pause is only implemented on Linux (SIGSTOP).
func (s *Server) Pause() error { return errors.New("bench: pausing redis-server needs Linux") }

// Resume is only implemented on Linux (SIGCONT).
func (s *Server) Resume() error { return errors.New("bench: pausing redis-server needs Linux") }
