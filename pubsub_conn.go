package relock

// The subscriber's connections: one shard per connection, its reader and
// writer goroutines, the health check, and reconnection after a fault.
// Cluster routing is in pubsub_cluster.go.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Health of a subscriber connection. After healthInterval without any
// message the reader sends PING, and something — the PONG or anything else —
// must arrive within pongTimeout, or the connection is taken for dead: closed,
// replaced, its channels subscribed again and their waiters woken to re-check.
// A connection that fails silently (a half-open TCP connection: a dead NAT
// entry, a host gone without a reset) is therefore replaced at most
// healthInterval+pongTimeout (1.5 s) after the last message it carried, and a
// wake-up lost with it delays a waiter by that plus one reconnect, never by
// the holder's lease. The price is one PING per second per idle connection.
const (
	healthInterval = time.Second
	pongTimeout    = 500 * time.Millisecond
)

// Reconnection. A connection that was working is replaced at once; attempts
// that fail (nothing answered) are spaced reconnectMin, doubling up to
// reconnectMax, and the spacing is reset once a connection works again.
// reconnectMax is also the bound on how late, after Redis comes back from an
// outage of any length, the waiters re-check: one second, not a lease.
const (
	reconnectMin = 100 * time.Millisecond
	reconnectMax = time.Second
	// slotMapWait bounds how long a Cluster shard, after Redis ended or
	// redirected one of its subscriptions (failover, slot migration, MOVED),
	// waits for go-redis's reloaded slot map to show the slot's new master
	// before it subscribes again.
	slotMapWait = time.Second
	// idleTimeout is how long a connection that carries no channel is kept
	// (pinged) for the next waiter before it is closed.
	idleTimeout = 30 * time.Second
)

// recheckReason is what the subscriber tells the engine when a connection was
// lost or re-established: holds must be checked at once.
const recheckReason = "subscriber reconnect"

// errNoPong is why a connection whose PING went unanswered was replaced.
var errNoPong = fmt.Errorf("relock: subscriber connection silent: no reply to PING within %v", pongTimeout)

// shard is one subscriber connection and the channels it must carry.
type shard struct {
	addr  string
	node  redis.UniversalClient // what its connections are opened through
	chans map[string]*chanState // the channels it must carry

	running bool          // its goroutines are alive
	quit    chan struct{} // closed when it retires
	kick    chan struct{} // the writer has commands to send

	// The current connection, nil while (re)connecting. The rest is about
	// that one connection and reset with it.
	ps       *redis.PubSub
	inflight map[string]int // subscribes sent, not yet confirmed, per channel
	leaving  map[string]int // unsubscribes sent, not yet confirmed
	outbox   []outCmd       // commands for ps, not yet written
	cause    error          // why ps was closed, by whoever closed it

	emptySince time.Time // when its last channel left

	replaced  bool      // ps replaces a connection that failed or was dropped
	reroute   bool      // Redis moved a channel: reload the slot map first
	downSince time.Time // an outage is in progress since then (zero: none)
	downErr   error     // what started it
}

type outCmd struct {
	unsub bool
	chans []string // all of one slot when sharded
}

// attach makes sh carry st's channel: subscribed at once on its connection,
// or when it has one. s.mu is held.
func (s *subscriber) attach(st *chanState, sh *shard) {
	st.shard = sh
	st.confirmed = false
	sh.chans[st.name] = st
	switch {
	case sh.ps != nil:
		s.queue(sh, outCmd{chans: []string{st.name}})
	case !sh.running:
		s.start(sh)
	}
	// Otherwise its goroutine is (re)connecting and takes the channel along.
}

// start runs the shard's goroutines. s.mu is held.
func (s *subscriber) start(sh *shard) {
	sh.running = true
	sh.quit = make(chan struct{})
	sh.kick = make(chan struct{}, 1)
	s.wg.Add(2)
	go s.run(sh)
	go s.write(sh)
}

// queue hands a command for the shard's current connection to its writer,
// counting the confirmations it will bring. s.mu is held and sh.ps is set.
func (s *subscriber) queue(sh *shard, cmd outCmd) {
	for _, ch := range cmd.chans {
		if cmd.unsub {
			sh.leaving[ch]++
		} else {
			sh.inflight[ch]++
		}
	}
	sh.outbox = append(sh.outbox, cmd)
	select {
	case sh.kick <- struct{}{}:
	default:
	}
}

// send writes one command on ps.
func (s *subscriber) send(ctx context.Context, ps *redis.PubSub, cmd outCmd) error {
	switch {
	case cmd.unsub && s.c.sharded.Load():
		return ps.SUnsubscribe(ctx, cmd.chans...)
	case cmd.unsub:
		return ps.Unsubscribe(ctx, cmd.chans...)
	case s.c.sharded.Load():
		return ps.SSubscribe(ctx, cmd.chans...)
	default:
		return ps.Subscribe(ctx, cmd.chans...)
	}
}

// write is the shard's writer: it sends the queued commands on the
// connection they were queued for, in order, and breaks that connection if a
// write fails.
func (s *subscriber) write(sh *shard) {
	defer s.wg.Done()
	ctx := context.Background()
	for {
		select {
		case <-sh.kick:
		case <-sh.quit:
			return
		case <-s.c.closing:
			return
		}
		s.mu.Lock()
		ps, cmds := sh.ps, sh.outbox
		sh.outbox = nil
		s.mu.Unlock()
		if ps == nil {
			continue
		}
		for _, cmd := range cmds {
			if err := s.send(ctx, ps, cmd); err != nil {
				s.breakConn(sh, ps, err)
				break
			}
		}
	}
}

// breakConn closes ps, the connection of sh, after a failure seen outside its
// reader; the reader then replaces it, reporting err.
func (s *subscriber) breakConn(sh *shard, ps *redis.PubSub, err error) {
	s.mu.Lock()
	if sh.ps == ps && sh.cause == nil {
		sh.cause = err
	}
	s.mu.Unlock()
	_ = ps.Close()
}

// run is the shard's connection loop: connect, subscribe every channel of
// the shard, read until the connection fails, and again, until the Client
// closes or the shard has no channel left.
func (s *subscriber) run(sh *shard) {
	defer s.wg.Done()
	var delay time.Duration // before the next attempt
	for {
		if delay > 0 && s.backoff(sh, delay) {
			return
		}
		s.awaitSlotMap(sh)
		chans, ok := s.plan(sh)
		if !ok {
			return
		}
		ps, err := s.open(sh, chans)
		if err == nil {
			err = s.install(sh, ps, chans)
		}
		if err != nil {
			if ps != nil {
				_ = ps.Close()
			}
			if s.isClosed() {
				return
			}
			delay = nextDelay(delay)
			s.failed(sh, err, delay)
			continue
		}
		opened := time.Now()
		if s.receive(sh, ps) && time.Since(opened) >= healthInterval {
			delay = 0 // it worked: replace it at once
		} else {
			delay = nextDelay(delay) // it never worked, or failed at once: back off
		}
		if s.isClosed() {
			return
		}
	}
}

func nextDelay(d time.Duration) time.Duration {
	if d == 0 {
		return reconnectMin
	}
	return min(2*d, reconnectMax)
}

// open opens a connection to the shard's node and subscribes chans, one
// command per slot. s.mu is not held: this dials.
func (s *subscriber) open(sh *shard, chans []string) (*redis.PubSub, error) {
	ctx := context.Background()
	if err := s.c.ready(ctx, chans[0]); err != nil {
		return nil, err
	}
	s.mu.Lock()
	node := sh.node
	s.mu.Unlock()
	var ps *redis.PubSub
	if s.c.sharded.Load() {
		ps = node.SSubscribe(ctx) // no channel: nothing sent yet
	} else {
		ps = node.Subscribe(ctx)
	}
	for _, cmd := range s.bySlot(chans) {
		if err := s.send(ctx, ps, cmd); err != nil {
			return ps, err
		}
	}
	return ps, nil
}

// install makes ps the shard's connection, with the subscribes open sent,
// and queues those of channels that joined meanwhile.
func (s *subscriber) install(sh *shard, ps *redis.PubSub, sent []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClientClosed
	}
	sh.ps, sh.cause, sh.outbox = ps, nil, nil
	sh.inflight = make(map[string]int, len(sent))
	sh.leaving = make(map[string]int)
	for _, ch := range sent {
		sh.inflight[ch] = 1
	}
	var late []string
	for name := range sh.chans {
		if sh.inflight[name] == 0 {
			late = append(late, name)
		}
	}
	for _, cmd := range s.bySlot(late) {
		s.queue(sh, cmd)
	}
	return nil
}

// receive reads ps until it fails or is replaced, running the health check,
// and reports whether anything at all came back on it.
func (s *subscriber) receive(sh *shard, ps *redis.PubSub) (heard bool) {
	ctx := context.Background()
	pinged := false
	for {
		timeout := healthInterval
		if pinged {
			timeout = pongTimeout
		}
		msg, err := ps.ReceiveTimeout(ctx, timeout)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if !pinged {
					if s.retireIdle(sh, ps) {
						return heard
					}
					if err := ps.Ping(ctx); err != nil {
						s.drop(sh, ps, err, false, heard)
						return heard
					}
					pinged = true
					continue
				}
				err = errNoPong
			}
			var reply redis.Error
			s.drop(sh, ps, err, errors.As(err, &reply), heard)
			return heard
		}
		pinged = false
		after, moved, ok := s.handle(sh, ps, msg, !heard)
		heard = true
		if after != nil {
			after()
		}
		if moved != nil {
			s.drop(sh, ps, moved, true, true)
			return heard
		}
		if !ok {
			return heard
		}
	}
}

// drop ends ps, the shard's connection, after a failure its reader saw:
// detaches it (unless that was done already), closes it, marks every channel
// of the shard unconfirmed, and records why. redirected marks an error reply
// or a subscription Redis ended by itself (the slot map must be reloaded
// before subscribing again); heard says whether ps had worked. The first
// failure of a connection that worked starts an outage (one Warn) and calls
// recheckHolds; a redirection of a working connection is no outage (Info).
// The shard's goroutine then connects again.
func (s *subscriber) drop(sh *shard, ps *redis.PubSub, err error, redirected, heard bool) {
	s.mu.Lock()
	if sh.ps != ps {
		s.mu.Unlock()
		_ = ps.Close()
		return
	}
	if sh.cause != nil {
		err = sh.cause
	}
	sh.ps, sh.cause, sh.outbox, sh.inflight, sh.leaving = nil, nil, nil, nil, nil
	for _, st := range sh.chans {
		st.confirmed = false
	}
	closed := s.closed
	sh.replaced = true
	var report func()
	switch {
	case closed:
	case redirected && heard:
		// Redis moved a channel (failover, slot migration): not an outage.
		sh.reroute = true
		report = func() {
			s.c.log.Info("relock: subscriptions moved; subscribing again on the slot's master",
				"shard", sh.addr, "err", err)
			s.recheck()
		}
	case sh.downSince.IsZero():
		sh.reroute = redirected
		sh.downSince, sh.downErr = time.Now(), err
		report = func() {
			s.c.log.Warn("relock: subscriber connection lost; waiters fall back to lease expiry until it is back",
				"shard", sh.addr, "err", err)
			s.recheck()
		}
	default:
		sh.reroute = redirected
	}
	s.mu.Unlock()
	_ = ps.Close()
	if !closed {
		s.c.noteFault(err)
	}
	if report != nil {
		report()
	}
}

// retireIdle closes ps, quietly, if its shard has carried no channel for
// idleTimeout; run then retires the shard unless a channel came meanwhile.
func (s *subscriber) retireIdle(sh *shard, ps *redis.PubSub) bool {
	s.mu.Lock()
	idle := sh.ps == ps && len(sh.chans) == 0 && !sh.emptySince.IsZero() && time.Since(sh.emptySince) >= idleTimeout
	if idle {
		sh.ps, sh.cause, sh.outbox, sh.inflight, sh.leaving = nil, nil, nil, nil, nil
	}
	s.mu.Unlock()
	if idle {
		_ = ps.Close()
	}
	return idle
}

// failed records a connection attempt that failed before any reply.
func (s *subscriber) failed(sh *shard, err error, retryIn time.Duration) {
	s.c.noteFault(err)
	s.mu.Lock()
	first := sh.downSince.IsZero()
	if first {
		sh.downSince, sh.downErr = time.Now(), err
	}
	sh.replaced = true
	s.mu.Unlock()
	if first {
		s.c.log.Warn("relock: subscriber cannot connect; waiters fall back to lease expiry until it can",
			"shard", sh.addr, "err", err)
		s.recheck()
		return
	}
	s.c.log.Debug("relock: subscriber reconnect failed", "shard", sh.addr, "err", err, "retry_in", retryIn)
}

// reestablished is called on the first message of a connection that
// replaced another; it returns what to report once s.mu is released.
// s.mu is held.
func (s *subscriber) reestablished(sh *shard) func() {
	sh.replaced = false
	since, cause := sh.downSince, sh.downErr
	sh.downSince, sh.downErr = time.Time{}, nil
	if since.IsZero() {
		return s.recheck // back after a move: no outage to report
	}
	return func() {
		down := time.Since(since)
		s.c.log.Info("relock: subscriber connection back", "shard", sh.addr, "down", down)
		if o := s.c.opts.observer; o != nil && o.SubscriberReconnected != nil {
			o.SubscriberReconnected(SubscriberEvent{Shard: sh.addr, Down: down, Err: cause})
		}
		s.recheck()
	}
}

// pause sleeps for d unless the Client closes first; it reports closing.
func (s *subscriber) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.c.closing:
		return true
	case <-t.C:
		return false
	}
}
