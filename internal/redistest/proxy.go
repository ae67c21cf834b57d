package redistest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback between a client and a server, which a
// test (or the benchmark's fault runs) uses to break the network: cut every
// connection, delay the traffic, stall all of it (a partition: connections
// stay open, nothing arrives), or blackhole the connections open now (a
// half-open connection: new ones work).
type Proxy struct {
	l      net.Listener
	target string
	closed chan struct{} // closed by Close: ends the writers' waits

	mu        sync.Mutex
	cond      *sync.Cond // signalled when stalled, frozen or isClosed changes
	conns     map[net.Conn]struct{}
	black     map[net.Conn]struct{} // connections whose traffic is dropped
	frozen    map[net.Conn]struct{} // connections whose traffic is held back
	toServer  time.Duration         // delay of what clients send
	toClient  time.Duration         // delay of what the server sends
	stalled   bool
	isClosed  bool
	accepts   int
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards every connection to
// target. It is closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartProxy is NewProxy for a program rather than a test (the benchmark):
// it returns an error instead of failing a test, and the caller closes the
// proxy.
func StartProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, closed: make(chan struct{}),
		conns: make(map[net.Conn]struct{}), black: make(map[net.Conn]struct{}),
		frozen: make(map[net.Conn]struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
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

// SetDelay passes every chunk of data on d after it arrived, in both
// directions (0: at once). Chunks do not wait for each other: a round trip
// takes 2d longer however much is in flight, as on a slow link.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.toServer, p.toClient = d, d
	p.mu.Unlock()
}

// SetReplyDelay is SetDelay for what the server sends only (its replies and
// pushed messages), so that a round trip takes d longer.
func (p *Proxy) SetReplyDelay(d time.Duration) {
	p.mu.Lock()
	p.toClient = d
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

// Freeze holds back, from now on, the traffic of the connections open now,
// in both directions, until Thaw, which lets it through in order;
// connections accepted later work normally. A request written on a frozen
// connection reaches the server only at Thaw, after what other
// connections sent meanwhile: a request delayed in the network, or in the
// socket buffer of a connection the server has not read yet. A frozen
// connection its client closes still passes what it held at Thaw, then
// closes.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.frozen[c] = struct{}{}
	}
}

// Thaw lets the frozen connections' traffic through.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.frozen)
	p.cond.Broadcast()
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

// CutBlackholed closes the blackholed connections, both sides: their
// streams have holes in them and can never carry a reply again. Pending
// commands fail at once instead of waiting for their timeouts.
func (p *Proxy) CutBlackholed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.black {
		_ = c.Close()
	}
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
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.isClosed = true
		close(p.closed)
		_ = p.l.Close()
		for c := range p.conns {
			_ = c.Close()
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		p.wg.Wait()
	})
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
		if !p.track(client, server) {
			return
		}
		go p.pipe(server, client, false)
		go p.pipe(client, server, true)
	}
}

// track registers a new pair of connections, or closes them and reports
// false when the proxy closed meanwhile.
func (p *Proxy) track(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isClosed {
		_ = client.Close()
		_ = server.Close()
		return false
	}
	p.accepts++
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.wg.Add(2)
	return true
}
