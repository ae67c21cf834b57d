package relock

import (
	"strconv"

	"github.com/relock-go/relock/inspect"
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

// Channels returns the pub/sub channels of the locks called name.
func (c *Client) Channels(name string) (inspect.Channels, error) {
	if err := c.usable(); err != nil {
		return inspect.Channels{}, err
	}
	ks, err := newKeyspace(c.opts.prefix, name)
	if err != nil {
		return inspect.Channels{}, err
	}
	var ch inspect.Channels
	for _, k := range inspected {
		k.channels(ks, &ch)
	}
	return ch, nil
}
