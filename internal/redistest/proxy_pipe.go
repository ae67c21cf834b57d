package redistest

import (
	"bytes"
	"net"
	"time"
)

// chunk is data read from one side of a connection, due at the other side
// at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies from src to dst until src fails, then closes both so that the
// other direction ends too. A writer of its own passes the chunks on at their
// due times, so that the reader keeps reading meanwhile and a delay shifts
// every chunk by the same time instead of adding up chunk after chunk.
func (p *Proxy) pipe(dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	queue := make(chan chunk, 1024)
	written := make(chan struct{})
	go p.write(dst, src, queue, written)
	p.read(src, fromServer, queue)
	close(queue)
	<-written
	_ = src.Close()
	_ = dst.Close()
	p.mu.Lock()
	delete(p.conns, src)
	delete(p.conns, dst)
	delete(p.black, src)
	delete(p.black, dst)
	delete(p.frozen, src)
	delete(p.frozen, dst)
	p.mu.Unlock()
}

// read queues what src sends, each chunk due after the delay of its
// direction, until src fails (EOF or a cut: either way it is over).
func (p *Proxy) read(src net.Conn, fromServer bool, queue chan<- chunk) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{data: bytes.Clone(buf[:n]), due: time.Now().Add(p.delayOf(fromServer))}
		}
		if err != nil {
			return
		}
	}
}

// write passes each queued chunk on to dst at its due time and after any
// stall, dropping it while src is blackholed. When it cannot go on (the
// proxy closed, dst failed) it closes src so that the reader ends, and
// drains the queue.
func (p *Proxy) write(dst, src net.Conn, queue <-chan chunk, written chan<- struct{}) {
	defer close(written)
	for c := range queue {
		if !p.hold(src, c.due) || (!p.blackholed(src) && !writeAll(dst, c.data)) {
			_ = src.Close()
			for range queue {
			}
			return
		}
	}
}

func writeAll(dst net.Conn, data []byte) bool {
	_, err := dst.Write(data)
	return err == nil
}

func (p *Proxy) delayOf(fromServer bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fromServer {
		return p.toClient
	}
	return p.toServer
}

func (p *Proxy) blackholed(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.black[c]
	return ok
}

// hold waits until due and then out any stall, and any freeze of src,
// before data from src passes; it reports false when the proxy closed
// meanwhile.
func (p *Proxy) hold(src net.Conn, due time.Time) bool {
	if wait := time.Until(due); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.closed:
			return false
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for (p.stalled || p.isFrozen(src)) && !p.isClosed {
		p.cond.Wait()
	}
	return !p.isClosed
}

// isFrozen reports whether c's traffic is held back; p.mu is held.
func (p *Proxy) isFrozen(c net.Conn) bool {
	_, ok := p.frozen[c]
	return ok
}
