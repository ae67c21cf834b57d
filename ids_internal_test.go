package relock

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// TestStrArgSendsOnlyItsOwnString: a ref is sent in place of s only when it
// is s itself; an equal string kept elsewhere, or none, sends s boxed, so
// that a stale ref can never send another value. What is sent reaches a
// script, and a command's text (what tracing hooks log), as the string.
func TestStrArgSendsOnlyItsOwnString(t *testing.T) {
	c := &Client{id: newClientID()}
	ref := c.newOpRef()
	s := *ref
	arg := strArg(s, ref)
	require.IsType(t, (*textArg)(nil), arg, "s itself: sent by pointer")

	other := strings.Clone(s) // equal, but other bytes
	assert.Equal(t, other, strArg(other, ref), "a ref to other bytes is ignored")
	assert.Equal(t, s, strArg(s, nil))
	assert.Equal(t, "", strArg("", ref), "an empty string is never the ref's")

	srv := redistest.Start(t)
	rdb := srv.Client()
	echo := redis.NewScript(`return ARGV[1]`)
	got, err := echo.Run(context.Background(), rdb, nil, arg).Text()
	require.NoError(t, err)
	assert.Equal(t, s, got, "the script receives the string")
	cmd := redis.NewCmd(context.Background(), "evalsha", "x", 0, arg)
	assert.Contains(t, cmd.String(), s, "a command's text shows the string, not a pointer")
}

// TestOpIDsAreTheClientsAndUnique: op ids, made in one allocation with
// their argument, are "<client id>:<n>" with n counting up, for any
// length of Client id.
func TestOpIDsAreTheClientsAndUnique(t *testing.T) {
	for _, id := range []string{newClientID(), strings.Repeat("x", 64)} {
		c := &Client{id: id}
		a, b := c.newOp(), *c.newOpRef()
		assert.Equal(t, id+":1", a)
		assert.Equal(t, id+":2", b)
	}
	c := &Client{id: newClientID()}
	c.reqSeq.Store(^uint64(0) - 1) // the longest sequence number fits
	assert.Equal(t, c.id+":18446744073709551615", c.newOp())
}

// TestHoldContextIsTheCallersContext: a hold context (an entry over an
// ownerCtx) keeps the caller's values and deadline; contexts derived from
// it follow its end, with its cause, without a goroutine each (the context
// package finds its cancellation through Value, which both answer as their
// parent for keys not theirs); and Unlock ends it with ErrUnlocked.
func TestHoldContextIsTheCallersContext(t *testing.T) {
	srv := redistest.Start(t)
	c := New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	type key struct{}
	deadline := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.WithValue(context.Background(), key{}, "v"), deadline)
	defer cancel()
	l := c.Lock("hold-ctx")
	held, err := l.Lock(parent)
	require.NoError(t, err)
	assert.Equal(t, "v", held.Value(key{}))
	d, ok := held.Deadline()
	assert.True(t, ok)
	assert.Equal(t, deadline, d)
	_, ok = OwnerOf(held)
	assert.True(t, ok)

	const children = 200
	before := runtime.NumGoroutine()
	derived := make([]context.Context, children)
	cancels := make([]context.CancelFunc, children)
	for i := range derived {
		derived[i], cancels[i] = context.WithCancel(held)
	}
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	assert.Less(t, runtime.NumGoroutine()-before, children/2, "deriving from a hold context starts no goroutine per child")

	require.NoError(t, l.Unlock(held))
	for _, ctx := range derived {
		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), ErrUnlocked)
	}
	assert.ErrorIs(t, context.Cause(held), ErrUnlocked)
	assert.NoError(t, parent.Err(), "the caller's context goes on")
}
