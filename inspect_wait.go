package relock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/inspect"
)

// addWaits fills each holder's WaitsFor in st from its owner's deadlock
// record (see deadlock.go): one GET per distinct owner, each its own
// command, since the records live in slots of their own. A record whose
// owner holds, in st, what it says it waits for is left out: that wait was
// granted and its record is on its way out.
func (c *Client) addWaits(ctx context.Context, st *inspect.State) error {
	waits := map[string]*inspect.Wait{}
	for _, h := range stateHolders(st) {
		if _, done := waits[h.Owner]; done {
			continue
		}
		rec, err := c.readWaitRecord(ctx, h.Owner)
		if err != nil {
			return err
		}
		waits[h.Owner] = nil
		if rec != nil && !holdsWaited(st, *rec) {
			waits[h.Owner] = &inspect.Wait{Kind: string(rec.lock.Kind), Name: rec.lock.Name, Since: time.UnixMilli(rec.start)}
		}
	}
	for _, h := range stateHolders(st) {
		h.WaitsFor = waits[h.Owner]
	}
	return nil
}

// readWaitRecord reads owner's deadlock record, nil when it has none.
func (c *Client) readWaitRecord(ctx context.Context, owner string) (*waitRecord, error) {
	v, err := request(c, "inspect", func() (string, error) {
		v, err := c.rdb.Get(ctx, c.deadlockKey(owner)).Result()
		if errors.Is(err, redis.Nil) {
			return "", nil
		}
		return v, err
	})
	if err != nil || v == "" {
		return nil, err
	}
	if rec, ok := parseWaitRecord(owner, v); ok {
		return &rec, nil
	}
	return nil, nil
}

// stateHolders are pointers to every holder of st, of every kind.
func stateHolders(st *inspect.State) []*inspect.Holder {
	var out []*inspect.Holder
	add := func(hs []inspect.Holder) {
		for i := range hs {
			out = append(out, &hs[i])
		}
	}
	if st.Lock != nil {
		add(st.Lock.Holders)
	}
	if st.FairLock != nil {
		add(st.FairLock.Holders)
	}
	if rw := st.RWLock; rw != nil {
		if rw.Writer != nil {
			out = append(out, rw.Writer)
		}
		add(rw.Readers)
	}
	if st.Semaphore != nil {
		add(st.Semaphore.Holders)
	}
	if st.SpinLock != nil {
		add(st.SpinLock.Holders)
	}
	return out
}

// holdsWaited reports whether st shows r's owner holding the lock r says
// it waits for.
func holdsWaited(st *inspect.State, r waitRecord) bool {
	if r.lock.Name != st.Name {
		return false
	}
	hs := holdersOf(st, r.lock.Kind)
	switch r.lock.Kind {
	case KindReadLock:
		if st.RWLock != nil {
			hs = st.RWLock.Readers
		}
	case KindWriteLock:
		if st.RWLock != nil && st.RWLock.Writer != nil {
			hs = []inspect.Holder{*st.RWLock.Writer}
		}
	}
	for _, h := range hs {
		if h.Owner == r.owner {
			return true
		}
	}
	return false
}

// holdersOf are the holders st shows of a Lock, a FairLock or a Semaphore
// for a wait of that kind; nil for another kind.
func holdersOf(st *inspect.State, kind Kind) []inspect.Holder {
	switch {
	case kind == KindLock && st.Lock != nil:
		return st.Lock.Holders
	case kind == KindFairLock && st.FairLock != nil:
		return st.FairLock.Holders
	case kind == KindSemaphore && st.Semaphore != nil:
		return st.Semaphore.Holders
	}
	return nil
}
