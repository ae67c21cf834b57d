package bench

import (
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on loopback in front of a Redis, for the overshoot
// run's network faults: replies delayed by a fixed time, or the connections
// open now blackholed (half-open: writes succeed, nothing ever arrives).
// It is the pattern of relock's internal/redistest Proxy, which this module
// cannot import, except that a delay shifts every chunk by the same time
// instead of adding up chunk after chunk.
type Proxy struct {
	l      net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	black  map[net.Conn]struct{}
	delay  time.Duration // of the server's replies
	closed bool
	wg     sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards every connection
// to target.
func StartProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, conns: make(map[net.Conn]struct{}), black: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect instead of the server.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// SetDelay delivers every chunk the server sends d after it arrived (0: at
// once), so that each round trip takes d longer.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Blackhole drops, from now on, all traffic of the connections open now, in
// both directions; later connections work.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.black[c] = struct{}{}
	}
}

// CutBlackholed closes the blackholed connections: their streams have holes
// in them and can never carry a reply again.
func (p *Proxy) CutBlackholed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.black {
		_ = c.Close()
	}
	clear(p.black)
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	_ = p.l.Close()
	for c := range p.conns {
		_ = c.Close()
	}
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
		p.conns[client] = struct{}{}
		p.conns[server] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(server, client, false)
		go p.pipe(client, server, true)
	}
}

// chunk is data read from one side, due at the other at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst until either fails, then closes both. Replies
// (fromServer) are held until their due time by a writer of their own, so
// that the reader keeps reading meanwhile.
func (p *Proxy) pipe(dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	out := make(chan chunk, 1024)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for c := range out {
			time.Sleep(time.Until(c.due))
			if _, err := dst.Write(c.data); err != nil {
				_ = src.Close()
				for range out { // let the reader finish
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			_, dropped := p.black[src]
			d := p.delay
			p.mu.Unlock()
			if !dropped {
				if !fromServer {
					d = 0
				}
				out <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(d)}
			}
		}
		if err != nil {
			break
		}
	}
	close(out)
	<-writerDone
	_ = src.Close()
	_ = dst.Close()
	p.mu.Lock()
	delete(p.conns, src)
	delete(p.conns, dst)
	delete(p.black, src)
	delete(p.black, dst)
	p.mu.Unlock()
}
