package relock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noNumbersShim is put before a script to make every number it passes to
// redis.call an error. Redis turns such a number into text with a printf
// of a double (%.17g), which cost an uncontended Lock+Unlock about 0.7 µs
// of Redis time in four of them (see clock_token in acquire_common.lua). The local redis shadows the global for the whole
// script, helpers included.
const noNumbersShim = `local real_redis = redis
local redis = setmetatable({call = function(...)
	for i = 1, select('#', ...) do
		if type((select(i, ...))) == 'number' then
			error('argument ' .. i .. ' of ' .. (...) .. ' is a number')
		end
	end
	return real_redis.call(...)
end}, {__index = real_redis})
`

// runWithoutNumbers runs call's script behind noNumbersShim.
func runWithoutNumbers(ctx context.Context, rdb redis.UniversalClient, call scriptCall) *redis.Cmd {
	shimmed := redis.NewScript(noNumbersShim + scriptSourceOf(call.script))
	return shimmed.Eval(ctx, rdb, call.keys, call.args...)
}

// scriptSourceOf returns the source a script was made of.
func scriptSourceOf(s *redis.Script) string {
	for _, name := range []string{"lock_acquire", "lock_release", "fair_acquire", "fair_release"} {
		src, _ := scriptSource(scriptFiles, name)
		if redis.NewScript(src).Hash() == s.Hash() {
			return src
		}
	}
	panic("scriptSourceOf: not a script of this test")
}

// The scripts of an uncontended Lock+Unlock and FairLock+Unlock, fenced or
// not, and a Lock's release that hands the lock over, pass Redis no number
// as a command argument: counts, tokens and latch slots go as text.
func TestCommonScriptPathsPassNoNumbers(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	lease := 10 * time.Second
	for _, fencing := range []bool{true, false} {
		c := New(rdb, WithFencingTokens(fencing))
		t.Cleanup(func() { _ = c.Close() })
		lk, fk := c.Lock("nonum").keys, c.FairLock("nonum").keys
		for round := range 3 { // the first writes the tail, the next ones find it
			op, rel := c.newOp(), c.newOp()
			owner := c.id + ":o" + strconv.Itoa(round)
			acq := lockAcquireCall(c, lk, owner, acquireReq{op: op, lease: lease}, true)
			require.NoError(t, runWithoutNumbers(ctx, rdb, acq).Err(), "Lock acquire, fencing %v", fencing)
			release := lockReleaseCall(c, lk, owner, releaseReq{op: rel, gen: op, final: true})
			n, err := runWithoutNumbers(ctx, rdb, release).Int64()
			require.NoError(t, err, "Lock release, fencing %v", fencing)
			require.Equal(t, int64(1), n)

			acq = fairAcquireCall(c, fk, acquireReq{owner: owner, op: op, lease: lease})
			require.NoError(t, runWithoutNumbers(ctx, rdb, acq).Err(), "FairLock acquire, fencing %v", fencing)
			release = fairReleaseCall(c, fk, releaseReq{owner: owner, op: rel, gen: op, final: true})
			n, err = runWithoutNumbers(ctx, rdb, release).Int64()
			require.NoError(t, err, "FairLock release, fencing %v", fencing)
			require.Equal(t, int64(1), n)
		}
	}

	// A hand-over: B queues behind A; A's release grants B (blind: nobody
	// listens here, the grant goes to the first queued waiter).
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	lk := c.Lock("nonum-handover").keys
	opA, opB := c.newOp(), c.newOp()
	_, err := lockAcquireCall(c, lk, c.id+":a", acquireReq{op: opA, lease: lease}, true).run(ctx, rdb).Int64Slice()
	require.NoError(t, err)
	v, err := lockAcquireCall(c, lk, c.id+":b", acquireReq{op: opB, lease: lease}, true).run(ctx, rdb).Int64Slice()
	require.NoError(t, err)
	require.Equal(t, int64(0), v[0], "B queues")
	release := lockReleaseCall(c, lk, c.id+":a", releaseReq{op: c.newOp(), gen: opA, final: true})
	release.args[6] = argTrue // blind
	n, err := runWithoutNumbers(ctx, rdb, release).Int64()
	require.NoError(t, err, "Lock release handing over")
	require.Equal(t, int64(1), n)
	assert.Equal(t, opB, rdb.HGet(ctx, lk.hash, "~g").Val(), "handed over to B")

	// The same for a FairLock, whose queue is a sorted set of its own.
	fk := c.FairLock("nonum-handover").keys
	opA, opB = c.newOp(), c.newOp()
	_, err = fairAcquireCall(c, fk, acquireReq{owner: c.id + ":a", op: opA, lease: lease, waiter: true}).run(ctx, rdb).Int64Slice()
	require.NoError(t, err)
	v, err = fairAcquireCall(c, fk, acquireReq{owner: c.id + ":b", op: opB, lease: lease, waiter: true}).run(ctx, rdb).Int64Slice()
	require.NoError(t, err)
	require.Equal(t, int64(0), v[0], "B queues")
	release = fairReleaseCall(c, fk, releaseReq{owner: c.id + ":a", op: c.newOp(), gen: opA, final: true})
	release.args[6] = argTrue // blind
	n, err = runWithoutNumbers(ctx, rdb, release).Int64()
	require.NoError(t, err, "FairLock release handing over")
	require.Equal(t, int64(1), n)
	assert.Equal(t, opB, rdb.HGet(ctx, fk.hash, "~g").Val(), "handed over to B")
}

// A token is the server's clock in µs, and the text the scripts write for
// it (the hold's ~t, and the tail's after the release) is that number in
// full, microseconds zero-padded: it is made from TIME's two strings, not
// from the number (see clock_token). When the clock is not above the last
// token, the token is the last + 1. Lock and FairLock, on miniredis, whose
// clock the test sets.
func TestTokenTextIsTheClockInFull(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	type kind struct {
		name       string
		hash, tail string // the key a free lock keeps its token in: its hash
		cycle      func() (token int64, held string)
	}
	l, fl := c.Lock("clock-text"), c.FairLock("clock-text")
	kinds := []kind{
		{"Lock", l.keys.hash, l.keys.hash, func() (int64, string) { return cycleToken(t, ctx, rdb, l, l.keys.hash) }},
		{"FairLock", fl.keys.hash, fl.keys.hash, func() (int64, string) { return cycleToken(t, ctx, rdb, fl, fl.keys.hash) }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			sec := int64(1764104530)
			var last int64
			for i, us := range []int64{0, 7, 99_999, 100_000, 654_321} {
				m.SetTime(time.Unix(sec+int64(i), us*1000))
				want := (sec+int64(i))*1_000_000 + us
				token, held := k.cycle()
				assert.Equal(t, want, token, "the token is the clock in µs (%d µs)", us)
				assert.Equal(t, strconv.FormatInt(want, 10), held, "the hold's ~t")
				assert.Equal(t, strconv.FormatInt(want, 10), rdb.HGet(ctx, k.tail, "~t").Val(), "the tail's ~t")
				last = token
			}
			m.SetTime(time.Unix(sec, 0)) // stepped back: the tail's token rules
			token, held := k.cycle()
			assert.Equal(t, last+1, token)
			assert.Equal(t, strconv.FormatInt(last+1, 10), held)
		})
	}
}

// A tokenLock is a Lock or a FairLock.
type tokenLock interface {
	Lock(ctx context.Context) (context.Context, error)
	Unlock(ctx context.Context) error
	Token(ctx context.Context) (int64, error)
}

// cycleToken takes and releases l, returning the hold's token and the ~t
// its hash held.
func cycleToken(t *testing.T, ctx context.Context, rdb redis.UniversalClient, l tokenLock, hash string) (int64, string) {
	t.Helper()
	h, err := l.Lock(ctx)
	require.NoError(t, err)
	token, err := l.Token(h)
	require.NoError(t, err)
	held := rdb.HGet(ctx, hash, "~t").Val()
	require.NoError(t, l.Unlock(h))
	return token, held
}
