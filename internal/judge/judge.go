package judge

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"time"
)

// Fault is one fault the test injected, for the verdict's context and its
// hand-off figures.
type Fault struct {
	Kind   string // e.g. "restart", "pause", "stop", "cut"
	Target string // what it hit: a process name, "redis", "all"
	Start  time.Time
	End    time.Time
}

// Judge collects the events of every process of one run.
type Judge struct {
	l  net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every event
	state   State
	conns   map[net.Conn]struct{}
	errs    []error
	closed  bool
}

// State is what the judge has seen so far.
type State struct {
	Events []Event
	Faults []Fault
	// Inside maps each process that is in its critical section now (as far
	// as its reports go) to its enter event.
	Inside map[string]Event
	// Done holds the processes that reported the end of their run.
	Done map[string]bool
}

// Listen starts a judge on a free loopback port.
func Listen() (*Judge, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("judge: listen: %w", err)
	}
	j := &Judge{
		l:       l,
		changed: make(chan struct{}),
		state:   State{Inside: make(map[string]Event), Done: make(map[string]bool)},
		conns:   make(map[net.Conn]struct{}),
	}
	j.wg.Add(1)
	go j.accept()
	return j, nil
}

// Addr is what processes pass to Dial (holderproc -judge).
func (j *Judge) Addr() string { return j.l.Addr().String() }

func (j *Judge) accept() {
	defer j.wg.Done()
	for {
		conn, err := j.l.Accept()
		if err != nil {
			return
		}
		j.mu.Lock()
		if j.closed {
			j.mu.Unlock()
			_ = conn.Close()
			return
		}
		j.conns[conn] = struct{}{}
		j.wg.Add(1)
		j.mu.Unlock()
		go j.read(conn)
	}
}

func (j *Judge) read(conn net.Conn) {
	defer j.wg.Done()
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		e, err := parseEvent(line)
		j.mu.Lock()
		if err != nil {
			j.errs = append(j.errs, err)
		} else {
			j.record(e)
		}
		j.mu.Unlock()
	}
}

// record adds e; called with j.mu held.
func (j *Judge) record(e Event) {
	s := &j.state
	s.Events = append(s.Events, e)
	switch e.Kind {
	case KindEnter:
		s.Inside[e.Proc] = e
	case KindExit, KindLost:
		delete(s.Inside, e.Proc)
	case KindDone:
		s.Done[e.Proc] = true
	}
	close(j.changed)
	j.changed = make(chan struct{})
}

// AddFault records a fault (Start and End set by the caller).
func (j *Judge) AddFault(f Fault) {
	j.mu.Lock()
	j.state.Faults = append(j.state.Faults, f)
	j.mu.Unlock()
}

// WaitFor waits until cond holds for the state seen so far, and reports
// whether it did before timeout. cond must not keep s or its contents.
func (j *Judge) WaitFor(timeout time.Duration, cond func(s *State) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		j.mu.Lock()
		ok := cond(&j.state)
		ch := j.changed
		j.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// Inside returns the processes inside their critical section now, as far as
// their reports go, with their enter events.
func (j *Judge) Inside() map[string]Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make(map[string]Event, len(j.state.Inside))
	for p, e := range j.state.Inside {
		out[p] = e
	}
	return out
}

// Snapshot returns a copy of what the judge has seen, and the protocol
// errors (malformed lines), if any.
func (j *Judge) Snapshot() (events []Event, faults []Fault, errs []error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Event(nil), j.state.Events...), append([]Fault(nil), j.state.Faults...), append([]error(nil), j.errs...)
}

// Stop tells every connected process to end its run.
func (j *Judge) Stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for c := range j.conns {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte("stop\n"))
	}
}

// Close stops listening, closes every connection and waits for the judge's
// goroutines.
func (j *Judge) Close() {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	_ = j.l.Close()
	for c := range j.conns {
		_ = c.Close()
	}
	j.mu.Unlock()
	j.wg.Wait()
}
