package relock

// The subscriber's connection side: one shard per connection, its writer and
// reader goroutines, the health check, the messages the reader applies, and
// reconnection after a fault. Cluster routing is in pubsub_cluster.go; what
// a waiter sees of the subscriber is in pubsub.go.
//
// One connection per shard: the only one on a single Redis (and for classic
// pub/sub on a Cluster, where any node hears every PUBLISH), one per master
// with sharded pub/sub on a Cluster, carrying the channels of all the slots
// that master serves. One connection per slot would make the number of
// connections grow with the number of locks waited on; one per master is the
// fewest that can work, as a shard channel is only heard on its own shard.
//
// What the subscriber believes is always what Redis has. go-redis's PubSub
// re-subscribes by itself after a reconnect, in one command for all channels,
// which a Cluster refuses (CROSSSLOT) when they span slots; so the subscriber
// never lets a PubSub live through a fault. Any error on a connection — lost,
// silent past the health check, an error reply such as MOVED — or a
// subscription that Redis ended by itself (the sunsubscribe a master sends
// when it loses a slot: failover, migration) closes that PubSub. Its shard's
// goroutine then opens a fresh one, routing every channel by the current
// slot map (reloaded first after a redirection) and subscribing them with one
// command per slot, never one across slots. Each confirmation wakes the
// channel's waiters, so nothing missed meanwhile strands them. Every
// connection loss and every re-establishment also calls the Client's
// recheckHolds: a fault that may have cost wake-ups may have cost holds too.
//
// Only the shard's goroutine opens or drops its connection. Subscribe and
// unsubscribe commands are queued under s.mu and written by the shard's
// writer goroutine, in order, so that no go-redis call — which may dial —
// ever runs with s.mu held.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
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

// handle applies one message of ps. It returns what to run once s.mu is
// released, an error when Redis moved a subscription (the connection must be
// rebuilt from the slot map), and false when ps is no longer the shard's.
func (s *subscriber) handle(sh *shard, ps *redis.PubSub, msg any, first bool) (after func(), moved error, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || sh.ps != ps {
		return nil, nil, false
	}
	if first && sh.replaced {
		after = s.reestablished(sh)
	}
	switch m := msg.(type) {
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			s.confirmed(sh, m.Channel)
		case "unsubscribe", "sunsubscribe":
			if s.unsubscribed(sh, m.Channel) {
				moved = fmt.Errorf("relock: redis ended the subscription to %q (failover or slot migration)", m.Channel)
			}
		}
	case *redis.Message:
		if gen, id, ok := s.forced(m); ok {
			return chain(after, func() { s.c.forcedElsewhere(gen, id) }), nil, true
		}
		s.delivered(m.Channel, m.Payload)
	}
	return after, moved, true
}

// forced reports the generation and the hold id of a message on the
// Client's own channel that says a force release removed them (see
// force_tell in force_common.lua): the hold ends at once, once s.mu is
// released, where it would learn it at its next renewal. s.mu is held.
func (s *subscriber) forced(m *redis.Message) (gen, id string, ok bool) {
	if s.presence == nil || m.Channel != s.presence.name {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(m.Payload, forcedPrefix)
	if !ok {
		return "", "", false
	}
	gen, id, ok = strings.Cut(rest, " ")
	return gen, id, ok
}

// chain returns a func that runs first (when not nil), then then.
func chain(first, then func()) func() {
	if first == nil {
		return then
	}
	return func() { first(); then() }
}

// confirmed handles the confirmation of a subscribe. s.mu is held.
func (s *subscriber) confirmed(sh *shard, channel string) {
	if n := sh.inflight[channel]; n > 1 {
		sh.inflight[channel] = n - 1
		return // a later subscribe of the same channel is still in flight
	}
	delete(sh.inflight, channel)
	st := sh.chans[channel]
	if st == nil {
		// Left meanwhile. Unless an unsubscribe is on its way, send one:
		// nothing stays subscribed that nobody waits on.
		if sh.leaving[channel] == 0 {
			s.queue(sh, outCmd{unsub: true, chans: []string{channel}})
		}
		return
	}
	st.confirmed = true
	st.confirmedAt = time.Now()
	s.wakeEveryone(st)
}

// unsubscribed handles an unsubscribe confirmation or push and reports
// whether Redis ended a subscription the shard still needs. s.mu is held.
func (s *subscriber) unsubscribed(sh *shard, channel string) bool {
	if n := sh.leaving[channel]; n > 0 {
		if n == 1 {
			delete(sh.leaving, channel)
		} else {
			sh.leaving[channel] = n - 1
		}
		return false // the answer to our own unsubscribe
	}
	st := sh.chans[channel]
	if st == nil {
		return false
	}
	st.confirmed = false
	return true
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

// recheck tells the engine to check every hold at once.
func (s *subscriber) recheck() {
	s.rechecked.Add(1)
	s.c.recheckHolds(recheckReason)
}

// rechecks returns how many times the subscriber called recheckHolds.
func (s *subscriber) rechecks() int64 { return s.rechecked.Load() }

func (s *subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
