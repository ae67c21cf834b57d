package relock

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Messages published on a lock's channel when it becomes free.
const (
	wakeOne = "1"   // an exclusive lock: one local waiter may take it
	wakeAll = "all" // several may enter (read locks) or all must re-check
	// handedOn tells the listeners of a hold (~m, see queue_common.lua) that
	// it was handed over: the lock is still held.
	handedOn = "handed"
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

// subscriber is the pub/sub side of a Client, shared by every goroutine that
// waits for a lock. Channels are reference-counted: the first waiter on a
// channel subscribes, the last one to leave unsubscribes.
//
// An unlock message wakes one queued waiter (all for wakeAll). A waiter that
// leaves without using its wake-up passes it on, and a wake-up that finds no
// queued waiter is kept (pending) for the next one, so no unlock is lost
// between a failed attempt and the next sleep. When a subscription is
// confirmed — first subscribe or re-subscribe after any fault — every waiter
// on the channel re-checks the lock, since messages may have been missed.
//
// # Connections
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
type subscriber struct {
	c *Client

	mu       sync.Mutex
	shards   map[string]*shard // by node address ("" when there is one)
	chans    map[string]*chanState
	presence *chanState // keepAlive's channel, once asked for
	closed   bool
	wg       sync.WaitGroup
	// waiting are the ids of this Client's waits that may still be handed
	// a lock: from before their first attempt until their hold is recorded
	// or the wait gave up (see expect). A grant to another id of this
	// Client is a stray (see granted).
	waiting map[string]struct{}

	rechecked atomic.Int64 // calls of recheckHolds, for tests
}

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

type chanState struct {
	name      string
	shard     *shard
	refs      int        // joined waiters
	queue     *list.List // of *waiter, the ones asleep, in wake-up order
	pendingAt time.Time  // a wake-up arrived then while no waiter was queued (zero: none)
	// allAt is when the last broadcast arrived (wakeAll): it is news to
	// every waiter whose attempt went out before it, so, unlike pendingAt,
	// no waiter uses it up.
	allAt       time.Time
	confirmed   bool
	confirmedAt time.Time
	keep        bool // the presence channel: subscribed until Close

	// A hand-over channel (one Client's channel for one lock, see
	// handingScheme) carries grants addressed to one waiter by its id.
	handing bool
	byID    map[string]*waiter // its joined waiters
	// grants that came before their waiter joined: id -> token. Only ids
	// still waiting are kept, and settle takes them out.
	grants map[string]int64
	idle   *time.Timer     // ends the subscription once it has lingered unused
	stray  func(id string) // releases a grant to an id that no longer waits
}

type waiter struct {
	s     *subscriber
	st    *chanState
	sig   chan struct{}
	elem  *list.Element // nil while not queued
	woken bool          // holds a wake-up it has not yet turned into an attempt

	id      string // its id in the lock's queue in Redis ("" : none)
	granted bool   // a release handed the lock over to it
	token   int64  // the granted hold's fencing token
}

func newSubscriber(c *Client) *subscriber {
	return &subscriber{
		c:       c,
		shards:  make(map[string]*shard),
		chans:   make(map[string]*chanState),
		waiting: make(map[string]struct{}),
	}
}

// join registers a waiter on channel. since is when the caller last tried
// the lock: if the subscription was confirmed after that, or a wake-up that
// found no queued waiter came after that, the waiter is signalled at once so
// that it tries again. id, when not empty, makes channel a hand-over channel
// and the waiter the addressee of grants to id (one that came already is
// its at once).
func (s *subscriber) join(ctx context.Context, channel, id string, since time.Time) (*waiter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClientClosed
	}
	st := s.chans[channel]
	if st == nil {
		sh, err := s.shardFor(ctx, channel)
		if err != nil {
			return nil, err
		}
		st = &chanState{name: channel, queue: list.New()}
		s.chans[channel] = st
		s.attach(st, sh)
	}
	st.refs++
	w := &waiter{s: s, st: st, sig: make(chan struct{}, 1), id: id}
	w.elem = st.queue.PushBack(w)
	if id != "" {
		s.joinHanding(st, w)
	}
	if missed(st, since) {
		s.wake(w)
	}
	return w, nil
}

// joinHanding registers w by its id on the hand-over channel st, stopping
// the linger of an unused subscription. s.mu is held.
func (s *subscriber) joinHanding(st *chanState, w *waiter) {
	if st.byID == nil {
		st.handing = true
		st.byID = make(map[string]*waiter)
		st.grants = make(map[string]int64)
	}
	if st.idle != nil {
		st.idle.Stop()
		st.idle = nil
	}
	st.byID[w.id] = w
	if token, ok := st.grants[w.id]; ok {
		delete(st.grants, w.id)
		w.granted, w.token = true, token
		s.wake(w)
	}
}

// granted handles a hand-over message, "<waiter id> <token>": the lock may
// be the waiter's (the wait loop decides whether to trust or claim it, see
// grantCheck). A grant whose waiter has not joined yet (the message beat its
// attempt's reply) is kept for it while its wait may still take it. One to
// an id that no longer waits — its wait ended, or Redis came back with an
// older queue that still lists it — is a stray: nobody would use the hold,
// so it is released at once (stray runs the abandon script for that id),
// unless the Client holds that generation, which a duplicate of a grant
// already claimed would name. s.mu is held.
func (s *subscriber) granted(st *chanState, payload string) {
	id, tok, _ := strings.Cut(payload, " ")
	token, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return
	}
	if w := st.byID[id]; w != nil {
		w.granted, w.token = true, token
		s.wake(w)
		return
	}
	if _, ok := s.waiting[id]; ok {
		st.grants[id] = token
		return
	}
	if stray := st.stray; stray != nil && strings.HasPrefix(id, s.c.id+":") && !s.closed {
		s.c.goBackground(func() { stray(id) })
	}
}

// expect records that a wait of this Client may be handed a lock under id,
// from before its first attempt until settle.
func (s *subscriber) expect(id string) {
	s.mu.Lock()
	s.waiting[id] = struct{}{}
	s.mu.Unlock()
}

// settle ends expect(id) once the wait's hold is recorded or the wait gave
// up, dropping a grant kept for it on channel that nobody took: the hold it
// names is recorded already, or the wait's abandon released it.
func (s *subscriber) settle(channel, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiting, id)
	if st := s.chans[channel]; st != nil && st.grants != nil {
		delete(st.grants, id)
	}
}

// handedOver reports the attempt a hand-over to w amounts to, if one came.
func (w *waiter) handedOver() (attempt, bool) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if !w.granted {
		return attempt{}, false
	}
	return attempt{outcome: acquired, token: w.token}, true
}

// keepAlive subscribes the Client's own channel, <prefix>:client:<id>, and
// keeps it subscribed until Close, so that the Client keeps a connection
// that notices at once when Redis goes away or restarts (the connection
// breaks, or its PING goes unanswered): recheckHolds follows, as for any
// connection loss. It is idempotent, and a no-op on a Cluster, where no one
// connection stands for the whole deployment.
func (s *subscriber) keepAlive() {
	if s.c.rdb == nil || s.c.isCluster() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.presence != nil {
		return
	}
	name := s.c.opts.prefix + ":client:" + s.c.id
	sh, err := s.shardFor(context.Background(), name)
	if err != nil {
		return // not on a Cluster: cannot happen
	}
	st := &chanState{name: name, queue: list.New(), refs: 1, keep: true}
	s.presence = st
	s.chans[name] = st
	s.attach(st, sh)
}

// rearm puts a waiter whose attempt (started at tried) found the lock busy
// back to sleep, at the head of the queue (it keeps its turn), unless a
// wake-up already reached it. A wake-up kept pending since after its attempt
// started is its to use: the attempt may have run before that unlock.
func (w *waiter) rearm(tried time.Time) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.elem != nil || len(w.sig) > 0 {
		return
	}
	w.woken, w.granted = false, false
	w.elem = w.st.queue.PushFront(w)
	if missed(w.st, tried) {
		s.wake(w)
	}
}

// missed reports whether a waiter whose last attempt went out at since has
// missed a wake-up on st meanwhile: a broadcast, the subscription's
// confirmation, or a wake-up that found nobody queued (which it takes, so
// that it wakes one waiter only). s.mu is held.
func missed(st *chanState, since time.Time) bool {
	if st.pendingAt.After(since) {
		st.pendingAt = time.Time{}
		return true
	}
	return st.allAt.After(since) || (st.confirmed && st.confirmedAt.After(since))
}

// leave unregisters a waiter. One that was woken and did not get the lock
// passes its wake-up on to the next waiter.
func (w *waiter) leave(acquired bool) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st := w.st
	if w.elem != nil {
		st.queue.Remove(w.elem)
		w.elem = nil
	}
	st.refs--
	if st.byID != nil && st.byID[w.id] == w {
		delete(st.byID, w.id)
	}
	if w.woken && !w.granted && !acquired && st.refs > 0 {
		s.wakeOne(st)
	}
	if st.refs == 0 && st.handing && !s.closed {
		s.linger(st)
		return
	}
	s.retire(st)
}

// channelLinger is how long a hand-over channel stays subscribed after its
// last waiter left: a process that waits for a lock again and again keeps
// one subscription, instead of paying a SUBSCRIBE, an UNSUBSCRIBE and the
// attempt that follows a new subscription's confirmation at every wait.
const channelLinger = 2 * time.Second

// linger keeps the unused hand-over channel st subscribed for
// channelLinger, then retires it unless a waiter joined. s.mu is held.
func (s *subscriber) linger(st *chanState) {
	if st.idle != nil {
		st.idle.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(channelLinger, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if st.idle == t && st.refs == 0 {
			st.idle = nil
			s.retire(st)
		}
	})
	st.idle = t
}

// retire unsubscribes st, which nobody waits on. s.mu is held.
func (s *subscriber) retire(st *chanState) {
	if st.refs == 0 && s.chans[st.name] == st {
		delete(s.chans, st.name)
		sh := st.shard
		delete(sh.chans, st.name)
		if len(sh.chans) == 0 {
			sh.emptySince = time.Now()
		}
		if !s.closed && sh.ps != nil {
			s.queue(sh, outCmd{unsub: true, chans: []string{st.name}})
		}
	}
}

// wake pops w from its queue and signals it. s.mu is held.
func (s *subscriber) wake(w *waiter) {
	if w.elem != nil {
		w.st.queue.Remove(w.elem)
		w.elem = nil
	}
	w.woken = true
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

func (s *subscriber) wakeOne(st *chanState) {
	if front := st.queue.Front(); front != nil {
		s.wake(front.Value.(*waiter))
		return
	}
	st.pendingAt = time.Now()
}

func (s *subscriber) wakeEveryone(st *chanState) {
	for st.queue.Len() > 0 {
		s.wake(st.queue.Front().Value.(*waiter))
	}
	// Waiters between two attempts are not queued; they see this on rearm,
	// each of them.
	st.allAt = time.Now()
}

// clusterSharded returns the Cluster client when channels are shard channels
// of a Cluster, routed by slot.
func (s *subscriber) clusterSharded() (*redis.ClusterClient, bool) {
	cc, ok := s.c.rdb.(*redis.ClusterClient)
	return cc, ok && s.c.sharded
}

// shardFor returns the shard that must carry channel: the only one, or on a
// Cluster with sharded pub/sub the one of the master serving its slot, as
// go-redis's slot map has it. s.mu is held.
func (s *subscriber) shardFor(ctx context.Context, channel string) (*shard, error) {
	if cc, ok := s.clusterSharded(); ok {
		node, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			return nil, wrapRedis("find node for channel", err)
		}
		return s.shardAt(node.Options().Addr, node), nil
	}
	return s.shardAt("", s.c.rdb), nil
}

// shardAt returns the shard of addr, created if need be. s.mu is held.
func (s *subscriber) shardAt(addr string, node redis.UniversalClient) *shard {
	sh := s.shards[addr]
	if sh == nil {
		sh = &shard{addr: addr, node: node, chans: make(map[string]*chanState)}
		s.shards[addr] = sh
	}
	return sh
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

// bySlot splits channels into one subscribe command per slot when they are
// shard channels (a Cluster refuses one SSUBSCRIBE across slots), else one.
func (s *subscriber) bySlot(chans []string) []outCmd {
	if len(chans) == 0 {
		return nil
	}
	if !s.c.sharded {
		return []outCmd{{chans: chans}}
	}
	slots := make(map[int][]string)
	for _, ch := range chans {
		slots[slotOf(ch)] = append(slots[slotOf(ch)], ch)
	}
	order := make([]int, 0, len(slots))
	for slot := range slots {
		order = append(order, slot)
	}
	sort.Ints(order)
	cmds := make([]outCmd, len(order))
	for i, slot := range order {
		cmds[i] = outCmd{chans: slots[slot]}
	}
	return cmds
}

// send writes one command on ps.
func (s *subscriber) send(ctx context.Context, ps *redis.PubSub, cmd outCmd) error {
	switch {
	case cmd.unsub && s.c.sharded:
		return ps.SUnsubscribe(ctx, cmd.chans...)
	case cmd.unsub:
		return ps.Unsubscribe(ctx, cmd.chans...)
	case s.c.sharded:
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

// awaitSlotMap, after Redis moved one of the shard's channels (an
// sunsubscribe or a MOVED), asks go-redis to reload its slot map and waits
// until it routes one of the shard's channels elsewhere, or slotMapWait.
func (s *subscriber) awaitSlotMap(sh *shard) {
	cc, ok := s.clusterSharded()
	s.mu.Lock()
	wait := sh.reroute
	sh.reroute = false
	s.mu.Unlock()
	if !ok || !wait {
		return
	}
	deadline := time.Now().Add(slotMapWait)
	for n := 0; time.Now().Before(deadline); n++ {
		if n%8 == 0 {
			cc.ReloadState(context.Background()) // asynchronous; repeated in case the node asked lagged
		}
		if s.pause(25*time.Millisecond) || s.routedElsewhere(cc, sh) {
			return
		}
	}
}

// backoff waits d before the next connection attempt and reports whether the
// Client closed meanwhile. On a Cluster it watches the slot map while it
// waits, asking go-redis to reload it every 200 ms (one CLUSTER SLOTS, only
// while the node cannot be reached): once the map routes one of the shard's
// channels to another master — the node died and a replica took over — the
// wait ends, so that the channels move to the new master at once, not after
// the backoff that dialling the dead node has built up.
func (s *subscriber) backoff(sh *shard, d time.Duration) bool {
	cc, ok := s.clusterSharded()
	if !ok {
		return s.pause(d)
	}
	end := time.Now().Add(d)
	for n := 1; ; n++ {
		step := min(100*time.Millisecond, time.Until(end))
		if step <= 0 {
			return false
		}
		if s.pause(step) {
			return true
		}
		if n%2 == 0 {
			cc.ReloadState(context.Background())
		}
		if s.routedElsewhere(cc, sh) {
			return false
		}
	}
}

// routedElsewhere reports whether go-redis's slot map routes a channel of
// the shard (or all of them: none left) to another node.
func (s *subscriber) routedElsewhere(cc *redis.ClusterClient, sh *shard) bool {
	s.mu.Lock()
	names := make([]string, 0, len(sh.chans))
	for name := range sh.chans {
		names = append(names, name)
	}
	s.mu.Unlock()
	if len(names) == 0 {
		return true
	}
	ctx := context.Background()
	for _, name := range names {
		if node, err := cc.MasterForKey(ctx, name); err == nil && node.Options().Addr != sh.addr {
			return true
		}
	}
	return false
}

// plan decides what the shard's next connection carries. On a Cluster it
// first routes every channel by the current slot map, handing those of other
// masters to their shards. It reports false, retiring the shard, when the
// Client is closed or nothing is left to carry.
func (s *subscriber) plan(sh *shard) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		if cc, ok := s.clusterSharded(); ok {
			for name, st := range sh.chans {
				node, err := cc.MasterForKey(context.Background(), name)
				if err != nil {
					continue // try here; a wrong node answers MOVED
				}
				addr := node.Options().Addr
				if addr == sh.addr {
					sh.node = node
					continue
				}
				delete(sh.chans, name)
				s.attach(st, s.shardAt(addr, node))
			}
		}
		if len(sh.chans) > 0 {
			chans := make([]string, 0, len(sh.chans))
			for name := range sh.chans {
				chans = append(chans, name)
			}
			return chans, true
		}
	}
	// Retire. A later channel for this node starts a new shard.
	if s.shards[sh.addr] == sh {
		delete(s.shards, sh.addr)
	}
	sh.running = false
	close(sh.quit)
	return nil, false
}

// open opens a connection to the shard's node and subscribes chans, one
// command per slot. s.mu is not held: this dials.
func (s *subscriber) open(sh *shard, chans []string) (*redis.PubSub, error) {
	ctx := context.Background()
	s.mu.Lock()
	node := sh.node
	s.mu.Unlock()
	var ps *redis.PubSub
	if s.c.sharded {
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
		s.delivered(m.Channel, m.Payload)
	}
	return after, moved, true
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

// deliver handles an unlock message.
func (s *subscriber) deliver(channel, payload string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delivered(channel, payload)
}

// delivered is deliver with s.mu held.
func (s *subscriber) delivered(channel, payload string) {
	st := s.chans[channel]
	if st == nil {
		return
	}
	switch {
	case st.handing && strings.Contains(payload, " "):
		s.granted(st, payload)
	case st.handing && st.byID[payload] != nil:
		// One waiter asked to try again (see hand_over in handover_common.lua).
		s.wake(st.byID[payload])
	case payload == wakeAll:
		s.wakeEveryone(st)
	case payload == handedOn:
		// The hold passed to a queued waiter: still held, but under a new
		// lease, maybe shorter than the one the listeners (a MultiLock)
		// sleep on; nothing is published when it runs out. Each re-checks,
		// to sleep on the new holder's lease.
		s.wakeEveryone(st)
	default:
		s.wakeOne(st)
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
		s.c.observe(err)
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
	s.c.observe(err)
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

// close ends every shard connection, wakes every waiter (they see the Client
// closed) and waits for the shards' goroutines to exit.
func (s *subscriber) close() {
	s.mu.Lock()
	s.closed = true
	for _, st := range s.chans {
		s.wakeEveryone(st)
	}
	var open []*redis.PubSub
	for _, sh := range s.shards {
		if sh.ps != nil {
			open = append(open, sh.ps)
		}
	}
	s.mu.Unlock()
	for _, ps := range open {
		_ = ps.Close()
	}
	s.wg.Wait()
}

// listening reports whether this Client's subscription of channel is
// confirmed: a message published there now reaches it.
func (s *subscriber) listening(channel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[channel]
	return st != nil && st.confirmed
}

// channels returns how many channels waiters are subscribed to (for tests;
// the presence channel is not counted).
func (s *subscriber) channels() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.chans)
	if s.presence != nil {
		n--
	}
	return n
}

// follow keeps the waiter of a wait loop on the channel its last attempt
// named: it joins that channel (leaving another one), re-arms on the same
// one, or leaves when the attempt names none. It returns the waiter to sleep
// on (nil: none, sleep on the lease alone).
func (s *subscriber) follow(ctx context.Context, w *waiter, a attempt, spec waitSpec, tried time.Time) (*waiter, error) {
	subs := a.subs
	if subs == nil {
		subs = s
	}
	switch {
	case a.channel == "":
		if w != nil {
			w.leave(false)
		}
		return nil, nil
	case w == nil || w.s != subs || w.st.name != a.channel:
		if w != nil {
			w.leave(false)
		}
		nw, err := subs.join(ctx, a.channel, spec.id, tried)
		if err == nil && spec.stray != nil {
			subs.mu.Lock()
			nw.st.stray = spec.stray
			subs.mu.Unlock()
		}
		return nw, err
	}
	w.rearm(tried)
	return w, nil
}

// signal is the channel a wake-up of w arrives on (nil for no waiter, which
// never fires).
func (w *waiter) signal() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.sig
}
