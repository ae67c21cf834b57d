package redistest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// ReplyDropper is a go-redis dial hook that lets a test lose replies: once
// armed for a command, the next time that command is written, the server
// executes it and answers, and the connection throws the answer away and
// fails, as a network fault after execution would. go-redis then retries the
// command on a new connection — the replay a lock library must survive.
type ReplyDropper struct {
	mu      sync.Mutex
	armed   map[string]int // upper-case command name -> replies to drop
	dropped atomic.Int64
}

// NewReplyDropper returns a dropper; install it with rdb.AddHook.
func NewReplyDropper() *ReplyDropper {
	return &ReplyDropper{armed: make(map[string]int)}
}

// Arm makes the next n replies to command (e.g. "EVALSHA") be dropped.
func (d *ReplyDropper) Arm(command string, n int) {
	d.mu.Lock()
	d.armed[string(bytes.ToUpper([]byte(command)))] += n
	d.mu.Unlock()
}

// Disarm drops no more replies than those already taken.
func (d *ReplyDropper) Disarm() {
	d.mu.Lock()
	clear(d.armed)
	d.mu.Unlock()
}

// Dropped returns how many replies were dropped so far.
func (d *ReplyDropper) Dropped() int64 { return d.dropped.Load() }

func (d *ReplyDropper) take(cmd []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, n := range d.armed {
		if n > 0 && bytes.Equal(cmd, []byte(name)) {
			d.armed[name] = n - 1
			return true
		}
	}
	return false
}

// DialHook wraps every new connection.
func (d *ReplyDropper) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &dropConn{Conn: cn, d: d}, nil
	}
}

// ProcessHook passes commands through.
func (d *ReplyDropper) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook passes pipelines through.
func (d *ReplyDropper) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// errReplyDropped wraps io.ErrUnexpectedEOF, which go-redis treats as a
// broken connection and retries.
var errReplyDropped = fmt.Errorf("redistest: reply dropped after execution: %w", io.ErrUnexpectedEOF)

type dropConn struct {
	net.Conn
	d    *ReplyDropper
	drop atomic.Bool
}

func (c *dropConn) Write(p []byte) (int, error) {
	if name := commandName(p); name != nil && c.d.take(name) {
		c.drop.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *dropConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.drop.Load() {
		// The server has executed the command: it answered. Lose the answer.
		c.d.dropped.Add(1)
		_ = c.Conn.Close()
		return 0, errReplyDropped
	}
	return n, err
}

// commandName returns the first bulk string of a RESP array (the command),
// upper-cased, or nil.
func commandName(p []byte) []byte {
	// *<n>\r\n$<len>\r\n<name>\r\n
	if len(p) == 0 || p[0] != '*' {
		return nil
	}
	i := bytes.Index(p, []byte("\r\n$"))
	if i < 0 {
		return nil
	}
	rest := p[i+3:]
	j := bytes.Index(rest, []byte("\r\n"))
	if j < 0 {
		return nil
	}
	rest = rest[j+2:]
	k := bytes.Index(rest, []byte("\r\n"))
	if k < 0 {
		return nil
	}
	return bytes.ToUpper(rest[:k])
}
