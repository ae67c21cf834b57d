package relock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/inspect"
)

// A Client's name says to people which process an owner belongs to: Inspect,
// the relock command, ErrDeadlock's message and the Deadlock event show it
// beside each owner. It is kept out of the holds: a Client that holds
// something keeps one record, <prefix>:client:{<client id>} → name, which
// it writes at its first hold and the watchdog rewrites at each tick that
// renews or checks a hold, and which expires otherwise. Reading names is
// best-effort: an owner whose Client's record is missing (expired, or an
// owner of WithOwner's, which names no Client) shows without one. A name
// is not an owner and never decides who holds.

// maxClientNameLen bounds a Client's name (WithName).
const maxClientNameLen = 128

// WithName names the Client, beside its owners (default "<host>:<pid>"):
// 1 to 128 printable ASCII characters, no space; else ErrInvalidName.
func WithName(name string) Option {
	return func(o *options) error {
		if !validName(name) {
			return fmt.Errorf("%w: %q: 1 to %d printable ASCII characters, no space", ErrInvalidName, name, maxClientNameLen)
		}
		o.name = name
		return nil
	}
}

func validName(name string) bool {
	if name == "" || len(name) > maxClientNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] > '~' {
			return false
		}
	}
	return true
}

// defaultName is "<host>:<pid>", the host's characters that a name cannot
// have replaced with '_'.
func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	b := []byte(host)
	for i, ch := range b {
		if ch <= ' ' || ch > '~' {
			b[i] = '_'
		}
	}
	name := string(b) + ":" + strconv.Itoa(os.Getpid())
	if len(name) > maxClientNameLen {
		name = name[len(name)-maxClientNameLen:]
	}
	return name
}

// Name returns the Client's name (see WithName).
func (c *Client) Name() string { return c.opts.name }

// nameKey is the key of the name record of the Client with id: a hash tag
// of its own, so any single-key command reaches it on a Cluster.
func (c *Client) nameKey(id string) string {
	return c.opts.prefix + ":client:{" + tagEscaper.Replace(id) + "}"
}

// recordName writes the Client's name record, bounded by the unlock
// timeout; a failure is only logged (the record is best-effort).
func (c *Client) recordName() {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.unlockTimeout)
	defer cancel()
	ttl := 2 * c.opts.watchdogLease
	if _, err := request(c, "name record", c.rdb.Set(ctx, c.nameKey(c.id), c.opts.name, ttl).Result); err != nil {
		c.log.Debug("relock: could not record the client's name", "err", err)
	}
}

// clientOf is the id of the Client that made owner field owner: the part
// before its first ':' ("" for none: an owner of WithOwner's may be
// anything).
func clientOf(owner string) string {
	id, _, ok := strings.Cut(owner, ":")
	if !ok {
		return ""
	}
	return id
}

// namesOf gives the names of the Clients of owners, by owner: this
// Client's own from its options, the others' read in one pipeline (go-redis
// splits it by slot on a Cluster). An owner whose Client has no record is
// absent. Best-effort: it gives up within the unlock timeout, and a
// failure returns what was read.
func (c *Client) namesOf(ctx context.Context, owners []string) map[string]string {
	out := map[string]string{}
	ids := map[string]*redis.StringCmd{}
	for _, o := range owners {
		switch id := clientOf(o); id {
		case "":
		case c.id:
			out[o] = c.opts.name
		default:
			ids[id] = nil
		}
	}
	if len(ids) == 0 || c.rdb == nil {
		return out
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.unlockTimeout)
	defer cancel()
	_, _ = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id := range ids {
			ids[id] = p.Get(ctx, c.nameKey(id))
		}
		return nil
	})
	for _, o := range owners {
		if cmd := ids[clientOf(o)]; cmd != nil {
			if name, err := cmd.Result(); err == nil {
				out[o] = name
			} else if !errors.Is(err, redis.Nil) {
				c.log.Debug("relock: could not read a client's name", "err", err)
			}
		}
	}
	return out
}

// cycleNames reads the names of the Clients of a deadlock's owners, self's
// included (best-effort, see namesOf).
func (c *Client) cycleNames(ctx context.Context, self string, cycle []waitRecord) map[string]string {
	owners := []string{self}
	for _, r := range cycle {
		owners = append(owners, r.owner)
	}
	return c.namesOf(ctx, owners)
}

// addNames sets the Name of every holder and waiter of sts, read in one
// pipeline (best-effort).
func (c *Client) addNames(ctx context.Context, sts ...*inspect.State) {
	var holders []*inspect.Holder
	var waiters []*inspect.Waiter
	for _, st := range sts {
		holders = append(holders, stateHolders(st)...)
		waiters = append(waiters, stateWaiters(st)...)
	}
	owners := make([]string, 0, len(holders)+len(waiters))
	for _, h := range holders {
		owners = append(owners, h.Owner)
	}
	for _, w := range waiters {
		owners = append(owners, w.Owner)
	}
	names := c.namesOf(ctx, owners)
	for _, h := range holders {
		h.Name = names[h.Owner]
	}
	for _, w := range waiters {
		w.Name = names[w.Owner]
	}
}

// stateWaiters are the waiters of every kind in st.
func stateWaiters(st *inspect.State) []*inspect.Waiter {
	var out []*inspect.Waiter
	add := func(ws []inspect.Waiter) {
		for i := range ws {
			out = append(out, &ws[i])
		}
	}
	if st.Lock != nil {
		add(st.Lock.Queued)
	}
	if st.FairLock != nil {
		add(st.FairLock.Waiters)
	}
	if st.RWLock != nil {
		add(st.RWLock.WritersWaiting)
	}
	if st.Semaphore != nil {
		add(st.Semaphore.Waiters)
	}
	return out
}

// named is owner followed by its Client's name in parentheses, when known.
func named(owner string, names map[string]string) string {
	if n := names[owner]; n != "" {
		return owner + " (" + n + ")"
	}
	return owner
}
