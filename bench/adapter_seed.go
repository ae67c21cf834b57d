package bench

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// SeedName is the seed documents' reentrant lock: the floor a reentrant lock
// is measured against.
const SeedName = "seed"

// seedAcquire is Redisson's RLock acquire (RedissonLock#tryLockInnerAsync)
// as printed in the seed documents (/work/shared/seeds): a hash holding a
// count per owner, its lease renewed by every entry. It returns nil when the
// lock is held, else the lock's remaining lease in ms. KEYS[1] the lock,
// ARGV[1] the lease in ms, ARGV[2] the owner.
var seedAcquire = redis.NewScript(`if (redis.call('exists', KEYS[1]) == 0) then ` +
	`redis.call('hincrby', KEYS[1], ARGV[2], 1); ` +
	`redis.call('pexpire', KEYS[1], ARGV[1]); ` +
	`return nil; ` +
	`end; ` +
	`if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then ` +
	`redis.call('hincrby', KEYS[1], ARGV[2], 1); ` +
	`redis.call('pexpire', KEYS[1], ARGV[1]); ` +
	`return nil; ` +
	`end; ` +
	`return redis.call('pttl', KEYS[1]);`)

// seedRelease is Redisson's RLock release (RedissonLock#unlockInnerAsync)
// as printed in the seed documents: nil when the owner holds nothing, 0
// when a re-entry remains, 1 when the lock was deleted and the release
// published on the lock's channel. KEYS[1] the lock, KEYS[2] its channel,
// ARGV[1] the message, ARGV[2] the lease in ms, ARGV[3] the owner.
var seedRelease = redis.NewScript(`if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then ` +
	`return nil;` +
	`end; ` +
	`local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ` +
	`if (counter > 0) then ` +
	`redis.call('pexpire', KEYS[1], ARGV[2]); ` +
	`return 0; ` +
	`else ` +
	`redis.call('del', KEYS[1]); ` +
	`redis.call('publish', KEYS[2], ARGV[1]); ` +
	`return 1; ` +
	`end; ` +
	`return nil;`)

// seedUnlockMessage is Redisson's LockPubSub.UNLOCK_MESSAGE.
const seedUnlockMessage = "0"

func seedLibrary() Library {
	return Library{
		Name: SeedName,
		Strategy: "the seed documents' lock (Redisson's RLock acquire and release Lua, EVALSHA): hash with a count per owner, " +
			"pexpire, the release publishes; a waiter subscribes to the lock's channel and retries on each message or " +
			"when the holder's lease ends; fixed 30 s lease, no watchdog, fencing or replay latch",
		New: func(addr, prefix string, c *Counter) (Locker, error) {
			return newSeedLocker(newGoredis(addr, c), prefix), nil
		},
	}
}

// seedLocker is one process of the seed lock: a go-redis client for the
// scripts and one pub/sub connection shared by its waiters, as Redisson's
// PublishSubscribeService shares one per lock channel.
type seedLocker struct {
	rdb    *redis.Client
	prefix string
	id     string
	holds  atomic.Int64 // numbers the owners ("uuid:threadId" in Redisson)
	lease  string       // ms

	ps   *redis.PubSub
	done chan struct{}
	mu   sync.Mutex
	subs map[string]*seedChannel
}

// seedChannel is a lock channel the process's waiters listen on.
type seedChannel struct {
	waiters int
	// sent counts the SUBSCRIBEs written for the channel, confirmed those
	// Redis acknowledged; a waiter's subscription is live once confirmed
	// reaches the count its own SUBSCRIBE made. Redis answers in order.
	sent, confirmed int
	confirm         chan struct{} // closed and replaced on each confirmation
	// wake holds one permit per unlock message (Redisson's latch), at most
	// one: a waiter woken retries, and every release publishes again.
	wake chan struct{}
}

func newSeedLocker(rdb *redis.Client, prefix string) *seedLocker {
	s := &seedLocker{
		rdb: rdb, prefix: prefix, id: randomToken(),
		lease: strconv.FormatInt(floorLease.Milliseconds(), 10),
		done:  make(chan struct{}), subs: make(map[string]*seedChannel),
	}
	s.ps = rdb.Subscribe(context.Background()) // no channel yet: connects on the first SUBSCRIBE
	go s.receive()
	return s
}

// Lock is Redisson's lock(): try; on failure subscribe to the lock's
// channel, then retry each time an unlock message arrives or the holder's
// lease (the script's answer) runs out, until ctx ends.
func (s *seedLocker) Lock(ctx context.Context, name string) (Unlocker, error) {
	h := seedHold{s: s, key: s.prefix + name, owner: s.id + ":" + strconv.FormatInt(s.holds.Add(1), 10)}
	if held, err := h.acquired(ctx, nil); err != nil {
		return nil, err
	} else if held {
		return h, nil
	}
	ch := seedChannelOf(h.key)
	sub, err := s.subscribe(ctx, ch)
	if err != nil {
		return nil, err
	}
	defer s.unsubscribe(ch)
	for {
		var ttl time.Duration
		if held, err := h.acquired(ctx, &ttl); err != nil {
			return nil, err
		} else if held {
			return h, nil
		}
		t := time.NewTimer(ttl)
		select {
		case <-sub.wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// LockAgain re-enters u's hold: the same owner runs the acquire again.
func (s *seedLocker) LockAgain(ctx context.Context, u Unlocker) (Unlocker, error) {
	h := u.(seedHold)
	held, err := h.acquired(ctx, nil)
	if err == nil && !held {
		err = errors.New("bench: seed re-entry refused")
	}
	return h, err
}

func (s *seedLocker) Close() error {
	err := s.ps.Close()
	<-s.done
	return errors.Join(err, s.rdb.Close())
}

// subscribe adds a waiter to channel ch and returns once Redis has
// confirmed a subscription that started after the call: from then on no
// unlock message can be missed.
func (s *seedLocker) subscribe(ctx context.Context, ch string) (*seedChannel, error) {
	s.mu.Lock()
	sub := s.subs[ch]
	if sub == nil {
		sub = &seedChannel{confirm: make(chan struct{}), wake: make(chan struct{}, 1)}
		s.subs[ch] = sub
	}
	sub.waiters++
	first := sub.waiters == 1
	if first {
		sub.sent++
	}
	want := sub.sent
	s.mu.Unlock()
	if first {
		// A SUBSCRIBE that fails is remembered by go-redis and sent again on
		// its reconnection, whose confirmation then counts: the bench's
		// healthy Redis needs no more.
		if err := s.ps.Subscribe(ctx, ch); err != nil {
			s.unsubscribe(ch)
			return nil, err
		}
	}
	for {
		s.mu.Lock()
		ok, confirmed := sub.confirmed >= want, sub.confirm
		s.mu.Unlock()
		if ok {
			return sub, nil
		}
		select {
		case <-confirmed:
		case <-ctx.Done():
			s.unsubscribe(ch)
			return nil, ctx.Err()
		}
	}
}

// unsubscribe removes a waiter from ch; the last one unsubscribes, as
// Redisson does once a lock is acquired. The channel's record stays while a
// confirmation is due, so that counts stay in step with Redis's replies.
func (s *seedLocker) unsubscribe(ch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.subs[ch]
	if sub.waiters--; sub.waiters == 0 {
		_ = s.ps.Unsubscribe(context.Background(), ch)
		s.forget(ch, sub)
	}
}

// forget drops ch's record once it has no waiter and no confirmation due.
// Called with s.mu held.
func (s *seedLocker) forget(ch string, sub *seedChannel) {
	if sub.waiters == 0 && sub.confirmed >= sub.sent {
		delete(s.subs, ch)
	}
}

// receive dispatches the pub/sub connection's replies until it is closed.
func (s *seedLocker) receive() {
	defer close(s.done)
	for {
		msg, err := s.ps.Receive(context.Background())
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		if err != nil { // go-redis reconnects (and resubscribes) on the next Receive
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		switch m := msg.(type) {
		case *redis.Subscription:
			if sub := s.subs[m.Channel]; sub != nil && m.Kind == "subscribe" {
				sub.confirmed++
				close(sub.confirm)
				sub.confirm = make(chan struct{})
				s.forget(m.Channel, sub)
			}
		case *redis.Message:
			if sub := s.subs[m.Channel]; sub != nil {
				select {
				case sub.wake <- struct{}{}:
				default:
				}
			}
		}
		s.mu.Unlock()
	}
}

// seedHold is one owner's hold on one key.
type seedHold struct {
	s          *seedLocker
	key, owner string
}

// acquired runs the acquire once and reports whether h now holds the lock;
// if not, the holder's remaining lease is stored in ttl when ttl is not nil.
func (h seedHold) acquired(ctx context.Context, ttl *time.Duration) (bool, error) {
	ms, err := seedAcquire.Run(ctx, h.s.rdb, []string{h.key}, h.s.lease, h.owner).Int64()
	if errors.Is(err, redis.Nil) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if ttl != nil {
		*ttl = max(time.Duration(ms)*time.Millisecond, 0)
	}
	return false, nil
}

// seedChannelOf is Redisson's channel of the lock key.
func seedChannelOf(key string) string { return "redisson_lock__channel:{" + key + "}" }

func (h seedHold) Unlock(ctx context.Context) error {
	_, err := seedRelease.Run(ctx, h.s.rdb, []string{h.key, seedChannelOf(h.key)}, seedUnlockMessage, h.s.lease, h.owner).Int64()
	if errors.Is(err, redis.Nil) {
		return errClosed
	}
	return err
}
