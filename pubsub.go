package relock

import (
	"container/list"
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Messages published on a lock's channel when it becomes free.
const (
	wakeOne = "1"   // an exclusive lock: one local waiter may take it
	wakeAll = "all" // several may enter (read locks) or all must re-check
)

// healthInterval is how long the subscriber connection may stay silent before
// it is pinged, so that a dead connection is noticed and re-established.
const healthInterval = 3 * time.Second

// subscriber is the one pub/sub connection of a Client (one per node on a
// Cluster), shared by every goroutine that waits for a lock. Channels are
// reference-counted: the first waiter on a channel subscribes, the last one to
// leave unsubscribes.
//
// An unlock message wakes one queued waiter (all for wakeAll). A waiter that
// leaves without using its wake-up passes it on, and a wake-up that finds no
// queued waiter is kept (pending) for the next one, so no unlock is lost
// between a failed attempt and the next sleep. When a subscription is
// confirmed — first subscribe or re-subscribe after a reconnect — every
// waiter on the channel re-checks the lock, since messages may have been
// missed before.
type subscriber struct {
	c *Client

	mu       sync.Mutex
	shards   map[string]*shard
	chans    map[string]*chanState
	inflight map[string]int // subscribe commands sent and not yet confirmed
	closed   bool
	wg       sync.WaitGroup
}

type shard struct {
	addr string
	ps   *redis.PubSub
}

type chanState struct {
	name        string
	shard       *shard
	refs        int        // joined waiters
	queue       *list.List // of *waiter, the ones asleep, in wake-up order
	pendingAt   time.Time  // a wake-up arrived then while no waiter was queued (zero: none)
	confirmed   bool
	confirmedAt time.Time
	leaseEnd    time.Time // when the holder's lease ends, as the last busy attempt saw it
}

type waiter struct {
	s     *subscriber
	st    *chanState
	sig   chan struct{}
	elem  *list.Element // nil while not queued
	woken bool          // holds a wake-up it has not yet turned into an attempt
}

func newSubscriber(c *Client) *subscriber {
	return &subscriber{
		c:        c,
		shards:   make(map[string]*shard),
		chans:    make(map[string]*chanState),
		inflight: make(map[string]int),
	}
}

// join registers a waiter on channel. since is when the caller last tried
// the lock: if the subscription was confirmed after that, or a wake-up that
// found no queued waiter came after that, the waiter is signalled at once so
// that it tries again.
func (s *subscriber) join(ctx context.Context, channel string, since, leaseEnd time.Time) (*waiter, error) {
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
		st = &chanState{name: channel, shard: sh, queue: list.New()}
		s.chans[channel] = st
		if sh.ps == nil {
			s.startShard(ctx, sh, channel)
		} else {
			s.subscribe(ctx, sh, channel)
		}
	}
	st.refs++
	st.leaseEnd = leaseEnd
	w := &waiter{s: s, st: st, sig: make(chan struct{}, 1)}
	w.elem = st.queue.PushBack(w)
	if st.pendingAt.After(since) || (st.confirmed && st.confirmedAt.After(since)) {
		st.pendingAt = time.Time{}
		s.wake(w)
	}
	return w, nil
}

// queued reports whether waiters of this process sleep on channel, confirmed
// subscribed, while the lock's lease (as last seen) has not ended by now, and
// when it ends: a newcomer can only queue behind them.
func (s *subscriber) queued(channel string, now time.Time) (leaseEnd time.Time, ok bool) {
	if channel == "" {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[channel]
	if st == nil || !st.confirmed || st.queue.Len() == 0 || !st.leaseEnd.After(now) {
		return time.Time{}, false
	}
	return st.leaseEnd, true
}

// rearm puts a waiter whose attempt (started at tried) found the lock busy
// back to sleep, at the head of the queue (it keeps its turn), unless a
// wake-up already reached it. A wake-up kept pending since after its attempt
// started is its to use: the attempt may have run before that unlock.
func (w *waiter) rearm(tried, leaseEnd time.Time) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	w.st.leaseEnd = leaseEnd
	if w.elem != nil || len(w.sig) > 0 {
		return
	}
	w.woken = false
	w.elem = w.st.queue.PushFront(w)
	if w.st.pendingAt.After(tried) {
		w.st.pendingAt = time.Time{}
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
	if w.woken && !acquired && st.refs > 0 {
		s.wakeOne(st)
	}
	if st.refs == 0 && s.chans[st.name] == st {
		delete(s.chans, st.name)
		if !s.closed {
			s.unsubscribe(st.shard, st.name)
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
	// Waiters between two attempts are not queued; they see this on rearm.
	st.pendingAt = time.Now()
}

// shardFor returns the connection that must carry channel: the only one, or
// on a Cluster with sharded pub/sub the one of the node serving its slot.
// s.mu is held.
func (s *subscriber) shardFor(ctx context.Context, channel string) (*shard, error) {
	addr := ""
	if cc, ok := s.c.rdb.(*redis.ClusterClient); ok && s.c.sharded {
		node, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			return nil, wrapRedis("find node for channel", err)
		}
		addr = node.Options().Addr
	}
	sh := s.shards[addr]
	if sh == nil {
		sh = &shard{addr: addr}
		s.shards[addr] = sh
	}
	return sh, nil
}

// startShard opens the shard's connection with its first channel (which, on
// a Cluster, is what routes it to the right node) and starts its reader.
// s.mu is held.
func (s *subscriber) startShard(ctx context.Context, sh *shard, channel string) {
	s.inflight[channel]++
	if s.c.sharded {
		sh.ps = s.c.rdb.SSubscribe(ctx, channel)
	} else {
		sh.ps = s.c.rdb.Subscribe(ctx, channel)
	}
	s.wg.Add(1)
	go s.read(sh)
}

// subscribe and unsubscribe only write the command; the confirmation comes
// back through read. A write error is not fatal: go-redis remembers the
// channel and subscribes it again when it reconnects. s.mu is held.
func (s *subscriber) subscribe(ctx context.Context, sh *shard, channel string) {
	s.inflight[channel]++
	var err error
	if s.c.sharded {
		err = sh.ps.SSubscribe(ctx, channel)
	} else {
		err = sh.ps.Subscribe(ctx, channel)
	}
	if err != nil {
		s.c.log.Warn("relock: subscribe failed; waiting on lease expiry until reconnect", "channel", channel, "err", err)
	}
}

func (s *subscriber) unsubscribe(sh *shard, channel string) {
	ctx := context.Background()
	var err error
	if s.c.sharded {
		err = sh.ps.SUnsubscribe(ctx, channel)
	} else {
		err = sh.ps.Unsubscribe(ctx, channel)
	}
	if err != nil {
		s.c.log.Warn("relock: unsubscribe failed", "channel", channel, "err", err)
	}
}

// read is the one goroutine per shard that receives confirmations and
// messages and turns them into wake-ups.
func (s *subscriber) read(sh *shard) {
	defer s.wg.Done()
	ctx := context.Background()
	for {
		msg, err := sh.ps.ReceiveTimeout(ctx, healthInterval)
		if err != nil {
			if s.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Silence: ping so that a dead connection shows up as an error.
				_ = sh.ps.Ping(ctx)
				continue
			}
			// The connection is gone, and the subscriptions with it; go-redis
			// re-subscribes on the next receive, and the confirmations make
			// every waiter re-check.
			s.c.log.Warn("relock: subscriber connection lost", "shard", sh.addr, "err", err)
			s.c.observe(err)
			s.disconnected(sh)
			if s.pause(100 * time.Millisecond) {
				return
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				s.confirmed(m.Channel)
			}
		case *redis.Message:
			s.deliver(m.Channel, m.Payload)
		}
	}
}

func (s *subscriber) confirmed(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.inflight[channel]; n > 0 {
		if n--; n > 0 {
			s.inflight[channel] = n
			return // a later subscribe of the same channel is still in flight
		}
		delete(s.inflight, channel)
	}
	st := s.chans[channel]
	if st == nil {
		return
	}
	st.confirmed = true
	st.confirmedAt = time.Now()
	s.wakeEveryone(st)
}

func (s *subscriber) deliver(channel, payload string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[channel]
	if st == nil {
		return
	}
	if payload == wakeAll {
		s.wakeEveryone(st)
	} else {
		s.wakeOne(st)
	}
}

func (s *subscriber) disconnected(sh *shard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, st := range s.chans {
		if st.shard == sh {
			st.confirmed = false
			delete(s.inflight, name)
		}
	}
}

func (s *subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// pause sleeps for d unless the subscriber closes first; it reports closing.
func (s *subscriber) pause(d time.Duration) bool {
	select {
	case <-s.c.closing:
		return true
	case <-time.After(d):
		return false
	}
}

// close ends every shard connection, wakes every waiter (they see the Client
// closed) and waits for the readers to exit.
func (s *subscriber) close() {
	s.mu.Lock()
	s.closed = true
	for _, st := range s.chans {
		s.wakeEveryone(st)
	}
	for _, sh := range s.shards {
		if sh.ps != nil {
			_ = sh.ps.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// channels returns how many channels are subscribed (for tests).
func (s *subscriber) channels() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chans)
}

// follow keeps the waiter of a wait loop on the channel its last attempt
// named: it joins that channel (leaving another one), re-arms on the same
// one, or leaves when the attempt names none. It returns the waiter to sleep
// on (nil: none, sleep on the lease alone).
func (s *subscriber) follow(ctx context.Context, w *waiter, a attempt, tried time.Time) (*waiter, error) {
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
		return subs.join(ctx, a.channel, tried, tried.Add(a.retryIn))
	}
	w.rearm(tried, tried.Add(a.retryIn))
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
