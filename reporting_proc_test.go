package relock_test

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A reportingProc is an internal/holderproc process that prints one result
// line when it is done. Its stderr is kept, so that a process that dies or
// hangs instead of reporting shows why: a hung one is sent SIGQUIT first,
// which makes the Go runtime print every goroutine's stack.
type reportingProc struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	lines  chan string
	exited chan struct{}
}

func startReportingProcess(t *testing.T, bin string, args ...string) *reportingProc {
	t.Helper()
	p := &reportingProc{cmd: exec.Command(bin, args...), lines: make(chan string, 1), exited: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.cmd.Stderr = &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err == nil {
			p.lines <- line
		}
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// report returns the process's result line once it has exited. It fails
// the test when the process exits without one, or has not reported within
// bound, showing the end of its stderr (its goroutines, when it hung).
func (p *reportingProc) report(t *testing.T, i int, bound time.Duration) string {
	t.Helper()
	timeout := time.NewTimer(bound)
	defer timeout.Stop()
	select {
	case line := <-p.lines:
		<-p.exited
		return line
	case <-p.exited:
		select {
		case line := <-p.lines:
			return line
		case <-time.After(time.Second): // the reader may still hold the last line
		}
		t.Fatalf("process %d exited without a result (%v); its stderr ends:\n%s", i, p.cmd.ProcessState, p.stderr.tail(200))
	case <-timeout.C:
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("process %d did not report within %v; its stderr ends:\n%s", i, bound, p.stderr.tail(1000))
	}
	return ""
}
