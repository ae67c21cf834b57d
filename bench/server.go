package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process the benchmark started for itself, on a
// free loopback port, without persistence (the approach of relock's
// internal/redistest, which this module cannot import).
type Server struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartServer starts redis-server from PATH and waits until it answers.
func StartServer(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("bench: no redis-server on PATH (install it, or pass -redis host:port): %w", err)
	}
	dir, err := os.MkdirTemp("", "relock-bench-")
	if err != nil {
		return nil, err
	}
	for range 5 { // a free port may be taken before redis-server binds it
		var port int
		if port, err = freePort(); err != nil {
			continue
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
		if err = s.start(ctx, bin, port); err == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("bench: cannot start redis-server: %w", err)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start(ctx context.Context, bin string, port int) error {
	log := filepath.Join(s.dir, "redis.log")
	s.cmd = exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--logfile", log)
	dieWithParent(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			b, _ := os.ReadFile(log)
			return fmt.Errorf("redis-server exited at start: %s", b)
		case <-ctx.Done():
			s.stop()
			return ctx.Err()
		default:
		}
		if rdb.Ping(ctx).Err() == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.stop()
	return errors.New("redis-server did not answer within 10s")
}

func (s *Server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Stop kills the server, waits for it to exit and removes its directory.
func (s *Server) Stop() {
	s.stop()
	_ = os.RemoveAll(s.dir)
}
