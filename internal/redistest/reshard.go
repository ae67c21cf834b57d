package redistest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A SlotMove is a reshard of one hash slot from its master to another, in
// the steps redis-cli --cluster reshard takes, split so that a test can act
// between them.
type SlotMove struct {
	c            *Cluster
	Slot         int64
	From, To     *Server
	fromID, toID string
}

// BeginMove starts moving key's slot to another master: the slot is marked
// IMPORTING there and MIGRATING on its master, and its keys are moved
// (MIGRATE). Until Finish, a request for the slot meets ASK and TRYAGAIN
// (a script whose keys are split between the two masters, or missing on
// both), which go-redis follows and retries only up to its MaxRedirects.
func (c *Cluster) BeginMove(ctx context.Context, key string) (*SlotMove, error) {
	from, err := c.MasterOf(ctx, key)
	if err != nil {
		return nil, err
	}
	masters, err := c.Masters(ctx)
	if err != nil {
		return nil, err
	}
	m := &SlotMove{c: c, From: from}
	for _, s := range masters {
		if s != from {
			m.To = s
			break
		}
	}
	if m.To == nil {
		return nil, fmt.Errorf("no other master to move the slot of %q to", key)
	}
	src, dst := from.Client(slowReplies), m.To.Client(slowReplies)
	defer src.Close()
	defer dst.Close()
	if m.Slot, err = src.ClusterKeySlot(ctx, key).Result(); err != nil {
		return nil, err
	}
	if m.fromID, err = src.Do(ctx, "CLUSTER", "MYID").Text(); err != nil {
		return nil, err
	}
	if m.toID, err = dst.Do(ctx, "CLUSTER", "MYID").Text(); err != nil {
		return nil, err
	}
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "IMPORTING", m.fromID).Err(); err != nil {
		return nil, err
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "MIGRATING", m.toID).Err(); err != nil {
		return nil, err
	}
	return m, m.migrateKeys(ctx)
}

// migrateKeys moves every key the slot still has on its old master.
func (m *SlotMove) migrateKeys(ctx context.Context) error {
	src := m.From.Client(slowReplies)
	defer src.Close()
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(m.Slot), 100).Result()
		if err != nil || len(keys) == 0 {
			return err
		}
		args := []any{"MIGRATE", "127.0.0.1", strconv.Itoa(m.To.Port()), "", 0, 20000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("migrate slot %d: %w", m.Slot, err)
		}
	}
}

// Finish moves the keys made meanwhile and gives the slot to its new
// master: SETSLOT NODE on the new master, the old, then the others, as
// redis-cli does.
func (m *SlotMove) Finish(ctx context.Context) error {
	if err := m.migrateKeys(ctx); err != nil {
		return err
	}
	masters, err := m.c.Masters(ctx)
	if err != nil {
		return err
	}
	order := []*Server{m.To, m.From}
	for _, s := range masters {
		if s != m.To && s != m.From {
			order = append(order, s)
		}
	}
	for _, s := range order {
		rdb := s.Client(slowReplies)
		err := rdb.Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.toID).Err()
		_ = rdb.Close()
		if err != nil {
			return fmt.Errorf("setslot %d node on %s: %w", m.Slot, s.Addr(), err)
		}
	}
	return nil
}

// slowReplies lets a MIGRATE, which blocks its server for the transfer,
// wait behind the others of a test that moves many slots at once.
func slowReplies(o *redis.Options) { o.ReadTimeout = 25 * time.Second }
