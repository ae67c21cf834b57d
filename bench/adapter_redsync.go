package bench

import (
	"context"
	"errors"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

func redsyncLibrary() Library {
	return Library{
		Name: "redsync",
		Strategy: "its defaults: 32 tries, random 50–250 ms between tries, 8 s expiry; " +
			"LockContext is called again after ErrFailed, as its godoc suggests",
		New: func(addr, prefix string, c *Counter) (Locker, error) {
			rdb := newGoredis(addr, c)
			return &redsyncLocker{rdb: rdb, rs: redsync.New(goredis.NewPool(rdb)), prefix: prefix + "redsync:"}, nil
		},
	}
}

type redsyncLocker struct {
	rdb    *goredislib.Client
	rs     *redsync.Redsync
	prefix string
}

func (r *redsyncLocker) Lock(ctx context.Context, name string) (Unlocker, error) {
	// A Mutex keeps the value of its one hold: one per acquisition.
	m := r.rs.NewMutex(r.prefix + name)
	for {
		err := m.LockContext(ctx)
		if err == nil {
			return redsyncHold{m}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, redsync.ErrFailed) {
			return nil, err
		}
	}
}

func (r *redsyncLocker) Close() error { return r.rdb.Close() }

type redsyncHold struct{ m *redsync.Mutex }

func (h redsyncHold) Unlock(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		return errClosed
	}
	return err
}
