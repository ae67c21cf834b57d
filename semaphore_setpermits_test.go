package relock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// A waiter asking for more permits than a capacity set while it waits
// fails at once with ErrInvalidArgument, while every permit is still held
// and from behind another waiter, and leaves no claim in the queue:
// whether its own Semaphore value or another process's set the capacity.
// The waiter ahead of it stays queued and is served.
func TestSemaphoreSetPermitsBelowAWaiterRefusesIt(t *testing.T) {
	for _, by := range []string{"same value", "other process"} {
		t.Run(by, func(t *testing.T) {
			b := newReal(t)
			ctx := context.Background()
			hs := b.newClient(t).Semaphore("below", 3)
			ws := b.newClient(t).Semaphore("below", 3)
			var holds []context.Context
			for range 3 {
				h, err := hs.Acquire(ctx, 1)
				require.NoError(t, err)
				holds = append(holds, h)
			}
			setter := ws
			if by == "other process" {
				setter = hs
			}
			small := acquireAsync(setter, 1) // at the head, blocked; the setter's, whose capacity then agrees
			requireWaiters(t, hs, 1)
			got := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				defer cancel()
				_, err := ws.Acquire(wctx, 3)
				got <- err
			}()
			requireWaiters(t, hs, 2)
			set := time.Now()
			require.NoError(t, setter.SetPermits(ctx, 2))
			select {
			case err := <-got:
				t.Logf("the waiter failed %v after SetPermits: %v", time.Since(set), err)
				require.ErrorIs(t, err, relock.ErrInvalidArgument)
				assert.NotErrorIs(t, err, relock.ErrNotObtained)
			case <-time.After(1500 * time.Millisecond):
				t.Fatal("the waiter was not refused at once")
			}
			st, err := hs.State(ctx)
			require.NoError(t, err)
			assert.Equal(t, relock.SemaphoreState{Permits: 2, Used: 3, Holds: 3, Waiters: 1}, st, "the refused claim left the queue")
			for _, h := range holds {
				require.NoError(t, hs.Release(h))
			}
			require.NoError(t, setter.Release(mustGet(t, small, 5*time.Second)))
			requireOnlyExpiringLeftovers(t, b.rdb)
		})
	}
}

// Acquires of one Semaphore value never fail because of that value's own
// SetPermits, however the two interleave.
func TestSemaphoreSetPermitsNeverFailsItsOwnAcquires(t *testing.T) {
	b := newReal(t)
	s := b.newClient(t).Semaphore("own", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var acquires, failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				acquires.Add(1)
				h, err := s.Acquire(ctx, 1+i%2)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				assert.NoError(t, s.Release(h))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			assert.NoError(t, s.SetPermits(ctx, 5-n%2))
		}
	}()
	time.Sleep(2 * time.Second) // the length of the run
	close(stop)
	wg.Wait()
	t.Logf("%d acquires, %d failed (first: %v)", acquires.Load(), failures.Load(), firstErr.Load())
	require.Greater(t, acquires.Load(), int64(20), "the run exercised the race")
	assert.Zero(t, failures.Load())
	requireOnlyExpiringLeftovers(t, b.rdb)
}

// An acquire whose reply is lost, with a SetPermits of another process run
// before go-redis resends it, is recognised as a replay: the resend gets
// the first run's grant, which the caller holds and releases; no permit
// is left behind.
func TestSemaphoreReplayedAcquireAfterSetPermits(t *testing.T) {
	srv := redistest.Start(t)
	loser := &replyLoser{}
	rdbA := srv.Client()
	rdbA.AddHook(loser)
	a := relock.New(rdbA)
	bc := relock.New(srv.Client())
	t.Cleanup(func() { _ = a.Close(); _ = bc.Close() })
	ctx := context.Background()
	sa, sb := a.Semaphore("replay", 3), bc.Semaphore("replay", 3)
	warm, err := sa.TryAcquire(ctx, 1, 0, 0) // the script is loaded: the lost reply is EVALSHA's
	require.NoError(t, err)
	require.NoError(t, sa.Release(warm))
	hb, err := sb.Acquire(ctx, 1)
	require.NoError(t, err)

	loser.arm(func() { assert.NoError(t, sb.SetPermits(ctx, 4)) })
	ha, err := sa.TryAcquire(ctx, 1, 0, 0)
	require.True(t, loser.lost.Load(), "the reply was lost and the request resent")
	require.NoError(t, err, "the resend is a replay of the grant")
	st, err := sb.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, relock.SemaphoreState{Permits: 4, Used: 2, Holds: 2}, st)
	require.NoError(t, sa.Release(ha))
	st, _ = sb.State(ctx)
	assert.Equal(t, 1, st.Used, "A's permit came back")
	require.NoError(t, sb.Release(hb))
	requireOnlyExpiringLeftovers(t, srv.Client())
}

// SetPermits returns by its caller's deadline, and when its caller
// cancels, while Redis hangs; the change applies once Redis answers.
func TestSemaphoreSetPermitsHonoursItsContext(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := relock.New(srv.Client(), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	s := c.Semaphore("set-bound", 3)
	h, err := s.Acquire(context.Background(), 1)
	require.NoError(t, err)
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()

	dctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	start := time.Now()
	err = s.SetPermits(dctx, 5)
	took := time.Since(start)
	assert.Less(t, took, callBound+boundSlack, "SetPermits took %v", took)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, relock.ErrUnavailable)

	cctx, cancelNow := context.WithCancel(context.Background())
	time.AfterFunc(callBound, cancelNow)
	start = time.Now()
	err = s.SetPermits(cctx, 5)
	took = time.Since(start)
	assert.Less(t, took, callBound+boundSlack, "a cancelled SetPermits took %v", took)
	assert.ErrorIs(t, err, context.Canceled, "the caller's cancellation is kept")
	assert.ErrorIs(t, s.SetPermits(cctx, 5), context.Canceled, "an ended context sends nothing")

	srv.Resume()
	resumed = true
	require.Eventually(t, func() bool {
		return s.Permits() == 5 && hgetall(t, rdb, s.Key())["~p"] == "5"
	}, 10*time.Second, 10*time.Millisecond, "the change applied once Redis answered")
	require.NoError(t, s.Release(h))
}

// replyLoser is a go-redis hook that loses the reply of the next EVALSHA
// once armed, after Redis ran it, and runs between, before go-redis
// resends the script, what another process does in the meantime.
type replyLoser struct {
	relock.PassHook
	mu      sync.Mutex
	between func()
	lost    atomic.Bool
}

func (l *replyLoser) arm(between func()) {
	l.mu.Lock()
	l.between = between
	l.mu.Unlock()
}

func (l *replyLoser) take() func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.between
	l.between = nil
	return f
}

func (l *replyLoser) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &losingConn{Conn: cn, l: l}, nil
	}
}

type losingConn struct {
	net.Conn
	l       *replyLoser
	between func() // armed for the reply to the command just written
}

func (c *losingConn) Write(p []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(p[:min(len(p), 32)]), []byte("evalsha")) {
		if f := c.l.take(); f != nil {
			c.between = f
		}
	}
	return c.Conn.Write(p)
}

func (c *losingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.between != nil {
		// Redis ran the command and answered: lose the answer.
		f := c.between
		c.between = nil
		_ = c.Conn.Close()
		f()
		c.l.lost.Store(true)
		return 0, errors.Join(errLostReply, io.ErrUnexpectedEOF)
	}
	return n, err
}

var errLostReply = errors.New("test: reply lost after execution")
