package relock_test

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// A call on a port that refuses connections sent nothing: its error keeps
// the dial error go-redis reported, also when the call is cut short by its
// deadline, and never says that the request may still run. Acquires wrap
// ErrNotObtained, every call ErrUnavailable, and a call cut short the
// context's error.
func TestCutShortOnARefusedPortSaysNothingWasSent(t *testing.T) {
	port, err := redistest.FreePort()
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	c := relock.New(rdb, relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })

	// Before go-redis has reported a dial error, the error says only that
	// nothing was sent.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = c.Lock("refused").IsLocked(ctx)
	cancel()
	assert.ErrorIs(t, err, relock.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "nothing sent")
	assert.NotContains(t, err.Error(), "may still")

	// go-redis reports the dial error after its dial attempts (5, 100 ms
	// apart) and its retries (4 in all), about 2 s; a call without a deadline
	// waits for it.
	_, err = c.Lock("refused").TryLock(context.Background(), 0, 0)
	assertUnreachable(t, "TryLock", err, true)

	// A call cut short while go-redis dials again keeps that dial error.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Lock("refused").Lock(ctx)
	assertUnreachable(t, "Lock", err, true)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	calls := map[string]func(ctx context.Context) error{
		"IsLocked":  func(ctx context.Context) error { _, err := c.Lock("refused").IsLocked(ctx); return err },
		"CountDown": func(ctx context.Context) error { return c.CountDownLatch("refused").CountDown(ctx) },
		"ForceUnlock": func(ctx context.Context) error {
			_, err := c.Lock("refused").ForceUnlock(ctx)
			return err
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := call(ctx)
		cancel()
		assertUnreachable(t, name, err, false)
		assert.ErrorIs(t, err, context.DeadlineExceeded, name)
	}
}

func assertUnreachable(t *testing.T, name string, err error, acquire bool) {
	t.Helper()
	if acquire {
		assert.ErrorIs(t, err, relock.ErrNotObtained, name)
	}
	assert.ErrorIs(t, err, relock.ErrUnavailable, name)
	assert.ErrorContains(t, err, "connection refused", "%s: the dial error is kept", name)
	assert.NotContains(t, err.Error(), "may still", "%s: nothing was sent", name)
}

// On a Redis that stopped answering (SIGSTOP) with a connection open, a
// call cut short by its deadline was sent: its error says Redis had not
// answered, and that a change may still apply.
func TestCutShortOnAHungRedisSaysTheRequestMayStillRun(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := relock.New(rdb, relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, rdb.Ping(context.Background()).Err())
	srv.Pause()
	t.Cleanup(srv.Resume)

	cases := []struct {
		name    string
		call    func(ctx context.Context) error
		acquire bool
		says    string
	}{
		{"TryLock", func(ctx context.Context) error { _, err := c.Lock("hung").TryLock(ctx, time.Second, 0); return err }, true, "the request may still run"},
		{"Acquire", func(ctx context.Context) error { _, err := c.Semaphore("hung", 2).Acquire(ctx, 1); return err }, true, "the request may still run"},
		{"IsLocked", func(ctx context.Context) error { _, err := c.Lock("hung").IsLocked(ctx); return err }, false, "Redis had not answered"},
		{"CountDown", func(ctx context.Context) error { return c.CountDownLatch("hung").CountDown(ctx) }, false, "the request may still apply"},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := tc.call(ctx)
		cancel()
		if tc.acquire {
			assert.ErrorIs(t, err, relock.ErrNotObtained, tc.name)
		}
		assert.ErrorIs(t, err, relock.ErrUnavailable, tc.name)
		assert.ErrorIs(t, err, context.DeadlineExceeded, tc.name)
		assert.ErrorContains(t, err, tc.says, tc.name)
	}
}

// A call that got no connection from go-redis's pool in its PoolTimeout was
// not sent: it fails with ErrUnavailable (and an acquire with
// ErrNotObtained), naming the pool timeout, and never says it may still run.
func TestPoolTimeoutIsUnavailableAndNotSent(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.PoolSize, o.PoolTimeout = 1, 100*time.Millisecond })
	c := relock.New(rdb, relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, rdb.Ping(context.Background()).Err())
	srv.Pause()
	t.Cleanup(srv.Resume)
	go func() { _ = rdb.Ping(context.Background()).Err() }() // holds the pool's one connection
	require.Eventually(t, func() bool { return rdb.PoolStats().IdleConns == 0 }, 5*time.Second, time.Millisecond)

	_, err := c.Lock("pool").TryLock(context.Background(), 0, 0)
	assert.ErrorIs(t, err, relock.ErrNotObtained)
	assert.ErrorIs(t, err, relock.ErrUnavailable)
	assert.ErrorIs(t, err, redis.ErrPoolTimeout)
	assert.NotContains(t, err.Error(), "may still")

	_, err = c.Lock("pool").IsLocked(context.Background())
	assert.ErrorIs(t, err, relock.ErrUnavailable)
	assert.ErrorIs(t, err, redis.ErrPoolTimeout)
}

// hungListener accepts connections on loopback and never answers: a Redis
// that hangs before its first reply. accepted counts its connections.
func hungListener(t *testing.T) (addr string, accepted *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = new(atomic.Int64)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cn, err := ln.Accept()
			if err != nil {
				for _, cn := range conns {
					_ = cn.Close()
				}
				return
			}
			conns = append(conns, cn)
			accepted.Add(1)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String(), accepted
}
