package redistest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ConnKind is the role a go-redis connection plays: commands (scripts,
// pipelines) or a subscriber (pub/sub). Faults are placed on one kind at a
// time, since the bugs worth finding live where one connection is slow while
// the rest are fine.
type ConnKind int

const (
	// CommandConn is every connection that has not subscribed.
	CommandConn ConnKind = iota
	// SubscriberConn is a connection that has sent SUBSCRIBE, SSUBSCRIBE or
	// PSUBSCRIBE.
	SubscriberConn
)

func (k ConnKind) String() string {
	if k == SubscriberConn {
		return "subscriber"
	}
	return "command"
}

// ErrCut is the error a connection cut by ConnFaults returns.
var ErrCut = errors.New("redistest: connection cut by fault injection")

// ConnFaults is a go-redis hook (install with rdb.AddHook) that injects
// faults on the connections of one kind only: it delays what they read, cuts
// them before a given command is sent, or cuts them all at once. A
// connection's kind is known from the commands written on it.
type ConnFaults struct {
	mu      sync.Mutex
	delay   [2]time.Duration
	cutNext [2]map[string]int // upper-case command -> writes to cut
	conns   map[*faultConn]struct{}
	cuts    int
}

// NewConnFaults returns a hook that injects nothing until told to.
func NewConnFaults() *ConnFaults {
	f := &ConnFaults{conns: make(map[*faultConn]struct{})}
	f.cutNext[CommandConn] = make(map[string]int)
	f.cutNext[SubscriberConn] = make(map[string]int)
	return f
}

// SetDelay holds everything that connections of kind read for d before
// handing it to go-redis (0: no delay): replies, or pub/sub messages and
// confirmations.
func (f *ConnFaults) SetDelay(kind ConnKind, d time.Duration) {
	f.mu.Lock()
	f.delay[kind] = d
	f.mu.Unlock()
}

// CutBefore makes the next n writes of command (e.g. "EVALSHA") on a
// connection of kind fail without sending anything, closing that
// connection: the link broke just before the request.
func (f *ConnFaults) CutBefore(kind ConnKind, command string, n int) {
	f.mu.Lock()
	f.cutNext[kind][string(bytes.ToUpper([]byte(command)))] += n
	f.mu.Unlock()
}

// StopCutting drops the cuts CutBefore asked for that have not happened.
func (f *ConnFaults) StopCutting() {
	f.mu.Lock()
	for k := range f.cutNext {
		clear(f.cutNext[k])
	}
	f.mu.Unlock()
}

// Cut closes every open connection of kind now.
func (f *ConnFaults) Cut(kind ConnKind) {
	f.mu.Lock()
	var victims []*faultConn
	for c := range f.conns {
		if c.kind == kind {
			victims = append(victims, c)
		}
	}
	f.cuts += len(victims)
	f.mu.Unlock()
	for _, c := range victims {
		_ = c.Conn.Close()
	}
}

// Cuts returns how many connections were cut so far (by Cut or CutBefore).
func (f *ConnFaults) Cuts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cuts
}

// DialHook wraps every new connection.
func (f *ConnFaults) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := &faultConn{Conn: cn, f: f}
		f.mu.Lock()
		f.conns[c] = struct{}{}
		f.mu.Unlock()
		return c, nil
	}
}

// ProcessHook passes commands through.
func (f *ConnFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook passes pipelines through.
func (f *ConnFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

type faultConn struct {
	net.Conn
	f    *ConnFaults
	kind ConnKind // guarded by f.mu
}

var subscribeCommands = [][]byte{[]byte("SUBSCRIBE"), []byte("SSUBSCRIBE"), []byte("PSUBSCRIBE")}

func (c *faultConn) Write(p []byte) (int, error) {
	name := commandName(p)
	c.f.mu.Lock()
	for _, s := range subscribeCommands {
		if bytes.Equal(name, s) {
			c.kind = SubscriberConn
		}
	}
	cut := false
	if name != nil {
		if n := c.f.cutNext[c.kind][string(name)]; n > 0 {
			c.f.cutNext[c.kind][string(name)] = n - 1
			c.f.cuts++
			cut = true
		}
	}
	c.f.mu.Unlock()
	if cut {
		_ = c.Conn.Close()
		return 0, ErrCut
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.f.mu.Lock()
	d := c.f.delay[c.kind]
	c.f.mu.Unlock()
	if n > 0 && d > 0 {
		time.Sleep(d)
	}
	return n, err
}

func (c *faultConn) Close() error {
	c.f.mu.Lock()
	delete(c.f.conns, c)
	c.f.mu.Unlock()
	return c.Conn.Close()
}
