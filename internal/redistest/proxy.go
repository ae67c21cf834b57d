package redistest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback between a client and a server, which a
// test uses to break the network: cut every connection, slow every byte,
// stall all traffic (a partition: connections stay open, nothing arrives), or
// blackhole the connections open now (a half-open connection: new ones work).
type Proxy struct {
	t      testing.TB
	l      net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond // signalled when stalled or closed changes
	conns   map[net.Conn]struct{}
	black   map[net.Conn]struct{} // connections whose traffic is dropped
	delay   time.Duration
	stalled bool
	closed  bool
	accepts int
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards every connection to
// target. It is closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &Proxy{t: t, l: l, target: target, conns: make(map[net.Conn]struct{}), black: make(map[net.Conn]struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is where clients connect instead of the server.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Accepted returns how many client connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

// Cut closes every open connection at once, both sides; new connections are
// accepted as before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// SetDelay holds every chunk of data for d before passing it on, in both
// directions (0: no delay).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Stall holds back all traffic, on open and new connections alike, until
// Unstall: to both ends the peer looks alive and silent.
func (p *Proxy) Stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// Unstall lets the held-back traffic through.
func (p *Proxy) Unstall() {
	p.mu.Lock()
	p.stalled = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Blackhole silently drops, from now on, all traffic of the connections open
// now, in both directions: writes succeed, nothing arrives, nothing fails —
// what a dead NAT or conntrack entry, or a peer that vanished without a
// reset, looks like to both ends. Connections accepted later work normally.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.black[c] = struct{}{}
	}
}

// Unblackhole lets traffic of blackholed connections through again. What was
// dropped meanwhile stays lost: the streams have a hole in them.
func (p *Proxy) Unblackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.black)
}

// Blackholed returns how many connections (counting each side) drop their
// traffic now.
func (p *Proxy) Blackholed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.black)
}

// Close stops the proxy, closes every connection and waits for its
// goroutines to exit.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.l.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.accepts++
		p.conns[client] = struct{}{}
		p.conns[server] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

// pipe copies from src to dst until either side fails, then closes both so
// that the other direction ends too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = src.Close()
		_ = dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		delete(p.black, src)
		delete(p.black, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold() {
				return
			}
			if !p.blackholed(src) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // EOF or a cut: either way this connection is over
		}
	}
}

func (p *Proxy) blackholed(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.black[c]
	return ok
}

// hold applies the delay and waits out a stall before data passes; it
// reports false when the proxy closed meanwhile.
func (p *Proxy) hold() bool {
	p.mu.Lock()
	d := p.delay
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.stalled && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}
