package relock

// The subscriber as a waiter sees it, in the order a wait goes through it:
// follow the channel an attempt named, join it (reference-counted, the first
// waiter subscribes), sleep on the signal, rearm after a busy attempt, leave
// (the last waiter unsubscribes, a hand-over channel lingers first); then
// how an unlock message's wake-up is delivered to the queued waiters. The
// connections that carry the channels are in pubsub_conn.go, hand-over
// grants in pubsub_grants.go.

import (
	"container/list"
	"context"
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
// Its connections, one per shard, are described in pubsub_conn.go.
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
	// waitQueue) carries grants addressed to one waiter by its id.
	handing bool
	byID    map[string]*waiter // its joined waiters
	// grants that came before their waiter joined: id -> token. Only ids
	// still waiting are kept, and settle takes them out.
	grants map[string]int64
	idle   *time.Timer  // ends the subscription once it has lingered unused
	stray  strayRelease // releases a grant to an id that no longer waits
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
		if err == nil && spec.stray.q != nil {
			subs.mu.Lock()
			nw.st.stray = spec.stray
			subs.mu.Unlock()
		}
		return nw, err
	}
	w.rearm(tried)
	return w, nil
}

// join registers a waiter on channel. since is when the caller last tried
// the lock: if the subscription was confirmed after that, or a wake-up that
// found no queued waiter came after that, the waiter is signalled at once so
// that it tries again. id, when not empty, makes channel a hand-over channel
// and the waiter the addressee of grants to id (one that came already is
// its at once).
func (s *subscriber) join(ctx context.Context, channel, id string, since time.Time) (*waiter, error) {
	if err := s.c.ready(ctx, channel); err != nil { // the pub/sub mode routes channel
		return nil, err
	}
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

// signal is the channel a wake-up of w arrives on (nil for no waiter, which
// never fires).
func (w *waiter) signal() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.sig
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

// close ends every shard connection and wakes every waiter (they see the
// Client closed); Close then waits for the shards' goroutines (s.wg).
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
}
