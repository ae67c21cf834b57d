// Package redistest starts real redis-server processes for tests, on free
// loopback ports, and stops them when the test ends. Without a redis-server
// binary the test is skipped, unless RELOCK_REQUIRE_REDIS=1, which makes it
// fail: CI sets it so that real-Redis tests can never skip silently.
//
// The benchmark module (bench/) uses it too, through Run and StartProxy,
// which return errors instead of failing a test: one server start and one
// fault proxy for the tests and the measurements.
package redistest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireEnv is the environment variable that turns a missing binary into a
// test failure.
const RequireEnv = "RELOCK_REQUIRE_REDIS"

// Binary returns the path of the named binary (redis-server, redis-sentinel,
// redis-cli), skipping or failing t when it is missing.
func Binary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s not found and %s=1: install it (apt-get install redis-server redis-sentinel redis-tools)", name, RequireEnv)
		}
		t.Skipf("%s not found; set %s=1 to make this a failure", name, RequireEnv)
	}
	return path
}

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	conf string      // config file given before every other argument (redis-sentinel needs one)
	tls  *tls.Config // non-nil: the port is a tls-port and the plain port is off

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a redis-server on a free loopback port with extra config
// arguments (e.g. "--appendonly", "yes") and stops it when t ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return launch(t, &Server{t: t, bin: Binary(t, "redis-server"), dir: t.TempDir(), args: args})
}

// launch starts s on a free port and stops it when t ends.
func launch(t testing.TB, s *Server) *Server {
	t.Helper()
	if err := s.launch(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

// launch starts s on a free port, retrying on another port when the one it
// picked was taken meanwhile.
func (s *Server) launch() error {
	var err error
	for range 5 {
		if s.port, err = FreePort(); err != nil {
			continue
		}
		if err = s.start(); err == nil {
			return nil
		}
	}
	return fmt.Errorf("cannot start %s: %w", filepath.Base(s.bin), err)
}

// Run is Start for a program rather than a test (the benchmark): it starts
// redis-server from PATH in a temporary directory and returns an error
// instead of failing a test. The caller stops the server with Stop; Client
// does not close its clients, and Restart needs a test (use RestartErr).
func Run(args ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redistest: no redis-server on PATH: %w", err)
	}
	dir, err := os.MkdirTemp("", "relock-redis-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, args: args}
	if err := s.launch(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redistest: %w", err)
	}
	return s, nil
}

// Stop kills a server from Run and removes its directory.
func (s *Server) Stop() {
	s.Kill()
	_ = os.RemoveAll(s.dir)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	if s.tls != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.port))
	} else {
		args = append(args, "--port", strconv.Itoa(s.port))
	}
	args = append(append(args,
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"),
	), s.args...)
	cmd := exec.Command(s.bin, args...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited at start: %s", s.logTail())
		default:
		}
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, TLSConfig: s.tls})
		err := c.Ping(context.Background()).Err()
		_ = c.Close()
		if err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("redis-server did not answer within 10s: %s", s.logTail())
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// Addr returns host:port of the server.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func addrs(servers []*Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr()
	}
	return out
}

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Client returns a go-redis client of the server, closed when the test ends.
func (s *Server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr(), TLSConfig: s.tls}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	if s.t != nil { // a server from Run: the caller closes c
		s.t.Cleanup(func() { _ = c.Close() })
	}
	return c
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Pause stops the server process (SIGSTOP): connections stay open, nothing
// answers. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Running reports whether the server process is alive (it may be paused).
func (s *Server) Running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill ends the server with SIGKILL and waits until it has exited.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the server and starts it again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Info returns one section of INFO as a map.
func Info(ctx context.Context, c redis.UniversalClient, section string) (map[string]string, error) {
	raw, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string)
	for _, line := range strings.Split(raw, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// CommandCalls returns, from INFO commandstats, how many times each command
// (lower case, e.g. "evalsha") has been called.
func CommandCalls(ctx context.Context, c redis.UniversalClient) (map[string]int64, error) {
	info, err := Info(ctx, c, "commandstats")
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64)
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(v, ",")
		n, _ := strconv.ParseInt(strings.TrimPrefix(calls, "calls="), 10, 64)
		out[name] = n
	}
	return out, nil
}

// clientCommands are the commands relock's clients send themselves. INFO
// commandstats also counts the commands that scripts run inside Redis (HGET,
// PEXPIRE, PUBLISH, ...), which are not round trips and must not be counted
// as such.
var clientCommands = []string{
	"evalsha", "eval", "evalsha_ro", "eval_ro",
	"subscribe", "unsubscribe", "ssubscribe", "sunsubscribe", "ping",
}

// ClientCommands returns how many commands clients sent, from two
// CommandCalls snapshots: script calls, (un)subscriptions and pings, not the
// commands the scripts ran inside Redis, nor connection handshakes.
func ClientCommands(before, after map[string]int64) int64 {
	var n int64
	for _, name := range clientCommands {
		n += after[name] - before[name]
	}
	return n
}

// RestartErr is Restart that returns its error instead of failing the test:
// for a fault injected from a goroutine other than the test's.
func (s *Server) RestartErr() error {
	s.Kill()
	if err := s.start(); err != nil {
		return fmt.Errorf("redistest: restart: %w", err)
	}
	return nil
}

// DieWithParent makes a process the test starts die with the test binary,
// even when the binary is killed before its cleanups can run (where the
// platform allows it; elsewhere it does nothing).
func DieWithParent(cmd *exec.Cmd) { dieWithParent(cmd) }
