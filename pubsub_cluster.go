package relock

// Cluster routing of the subscriber's channels: with sharded pub/sub a
// channel is heard only on the master of its slot, so each shard follows
// go-redis's slot map, and subscribes with one command per slot.

import (
	"context"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSharded returns the Cluster client when channels are shard channels
// of a Cluster, routed by slot.
func (s *subscriber) clusterSharded() (*redis.ClusterClient, bool) {
	cc, ok := s.c.rdb.(*redis.ClusterClient)
	return cc, ok && s.c.sharded.Load()
}

// shardFor returns the shard that must carry channel: the only one, or on a
// Cluster with sharded pub/sub the one of the master serving its slot, as
// go-redis's slot map has it. s.mu is held.
func (s *subscriber) shardFor(ctx context.Context, channel string) (*shard, error) {
	if cc, ok := s.clusterSharded(); ok {
		node, err := cc.MasterForKey(ctx, channel)
		if err = s.c.noted("find node for channel", err); err != nil {
			return nil, err
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

// bySlot splits channels into one subscribe command per slot when they are
// shard channels (a Cluster refuses one SSUBSCRIBE across slots), else one.
func (s *subscriber) bySlot(chans []string) []outCmd {
	if len(chans) == 0 {
		return nil
	}
	if !s.c.sharded.Load() {
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
