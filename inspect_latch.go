package relock

import (
	"strconv"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
)

// latchInspect reads a latch's count (its field n, "" when the key does not
// exist); nil when the latch is open.
func latchInspect(key, count string) *inspect.Latch {
	n, err := strconv.Atoi(count)
	if err != nil || n <= 0 {
		return nil
	}
	return &inspect.Latch{Key: key, Count: n}
}

// Channels returns the channels of the locks called name, sending nothing.
func (c *Client) Channels(name string) (inspect.Channels, error) {
	if err := c.queryable(); err != nil {
		return inspect.Channels{}, err
	}
	ks, err := newKeyspace(c.opts.prefix, name)
	if err != nil {
		return inspect.Channels{}, err
	}
	var ch inspect.Channels
	for _, k := range inspected {
		if k.channels != nil {
			k.channels(ks, &ch)
		}
	}
	return ch, nil
}

// The CountDownLatch's row in the table of kinds (kinds.go).

func decodeLatch(st *inspect.State, v []keyValue, _ int64) {
	st.CountDownLatch = latchInspect(v[0].key, fieldValue(v[0].fields, "n"))
}

func summarizeLatch(st *inspect.State) (inspect.Summary, bool) {
	if l := st.CountDownLatch; l != nil {
		return inspect.Summary{Count: l.Count}, true
	}
	return inspect.Summary{}, false
}

func latchChannels(ks keyspace, ch *inspect.Channels) { ch.Latch = ks.key("latch:ch") }

func latchWatched(ch inspect.Channels) []string { return []string{ch.Latch} }

// latchRows: HOLDS is the count left; a latch has no owner and no lease.
func latchRows(st *inspect.State) []kinds.Row {
	if l := st.CountDownLatch; l != nil {
		return []kinds.Row{{Role: "closed", Owner: "-", Holds: strconv.Itoa(l.Count)}}
	}
	return nil
}

// forceLatch deletes a closed latch: opening it would tell its waiters that
// the work they wait for is done, so the command asks for it by name.
func forceLatch(c *Client, name string, st *inspect.State) []kinds.Release {
	if l := st.CountDownLatch; l != nil {
		return []kinds.Release{{Count: l.Count, Deletes: true, Do: c.CountDownLatch(name).Delete}}
	}
	return nil
}
