package relock_test

// The contract suite's cases about Close (see contract_test.go): its bound
// holds with a watchdog renewal in flight, and the waits it ends are not
// obtained, for every kind.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Close returns within WithUnlockTimeout while a watchdog renewal hangs
// on a paused Redis (SIGSTOP: the connection stays open, nothing answers),
// and the hold contexts of every kind that holds end with ErrClientClosed,
// not with a loss from a lease that ran out while Close waited for the
// renewal. The watchdog lease is 3 s: its renewal goes out 1 s after the
// last one, so the lease still has 2 s to run when Close begins.
func TestContractCloseIsBoundedWithARenewalInFlight(t *testing.T) {
	const unlockTimeout = 300 * time.Millisecond
	srv := redistest.Start(t)
	rdb := srv.Client()
	sent := &pipelineSignal{sent: make(chan struct{}, 1)}
	rdb.AddHook(sent)
	c := relock.New(rdb, relock.WithWatchdogLease(3*time.Second), relock.WithUnlockTimeout(unlockTimeout), relock.WithLogger(quietLogger()))
	t.Cleanup(func() { _ = c.Close() })
	holds := map[string]context.Context{}
	for _, k := range contractKinds {
		if k.name != "CountDownLatch" { // no hold, nothing renewed
			holds[k.name] = hold(t, k.open(c, "renewing:"+k.name))
		}
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	sent.armed.Store(true)
	select {
	case <-sent.sent: // the watchdog's renewal pipeline is out, and hangs
	case <-time.After(3 * time.Second):
		t.Fatal("no renewal was sent within the watchdog's interval")
	}
	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	t.Logf("Close took %v with a renewal in flight (unlock timeout %v)", took, unlockTimeout)
	assert.Less(t, took, unlockTimeout+300*time.Millisecond, "Close waited for the renewal")
	for name, hctx := range holds {
		assert.ErrorIs(t, context.Cause(hctx), relock.ErrClientClosed, "%s: the hold context's cause", name)
	}
}

// pipelineSignal is a go-redis hook that reports, once armed, the first
// pipeline sent: the watchdog's renewal, the only pipeline a Client sends
// while it holds and does nothing else.
type pipelineSignal struct {
	armed atomic.Bool
	sent  chan struct{}
}

func (p *pipelineSignal) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelineSignal) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelineSignal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if p.armed.Load() {
			select {
			case p.sent <- struct{}{}:
			default:
			}
		}
		return next(ctx, cmds)
	}
}

// A wait that Close ends is not obtained: every acquire of every kind (and a
// latch's Wait), with a context that can end and with one that cannot,
// returns ErrNotObtained and ErrClientClosed, holding nothing. Client A
// holds each name; Client B waits for it, then B is closed.
func TestContractCloseEndsAWaitAsNotObtained(t *testing.T) {
	srv := redistest.Start(t)
	a := relock.New(srv.Client())
	t.Cleanup(func() { _ = a.Close() })
	var waiting atomic.Int64
	b := relock.New(srv.Client(), relock.WithObserver(&relock.Observer{
		WaitStarted: func(context.Context, relock.LockInfo) { waiting.Add(1) },
	}))
	type waiter struct {
		what string
		got  chan callResult
	}
	var waiters []waiter
	for _, k := range contractKinds {
		open := k.open
		if k.one != nil {
			open = k.one
		}
		name := "interrupted:" + k.name
		blocker := open(a, name)
		if k.name == "ReadLock" { // a reader waits for a writer
			blocker = a.RWLock(name).WriteLock()
		}
		hold(t, blocker)
		v := open(b, name)
		for _, m := range ctxMethods(v) {
			if !acquires[m] {
				continue
			}
			for _, bounded := range []bool{false, true} {
				w := waiter{k.name + "." + m, make(chan callResult, 1)}
				if bounded {
					w.what += " (with a deadline)"
				}
				waiters = append(waiters, w)
				go func() {
					ctx := context.Background()
					if bounded {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 20*time.Second)
						defer cancel()
					}
					w.got <- contractCall(v, m, ctx, 20*time.Second, 0)
				}()
			}
		}
	}
	require.Eventually(t, func() bool { return waiting.Load() == int64(len(waiters)) },
		10*time.Second, 5*time.Millisecond, "every acquire waits")
	closed := time.Now()
	require.NoError(t, b.Close())
	for _, w := range waiters {
		select {
		case r := <-w.got:
			assert.ErrorIs(t, r.err, relock.ErrNotObtained, "%s", w.what)
			assert.ErrorIs(t, r.err, relock.ErrClientClosed, "%s", w.what)
			assert.Nil(t, r.hctx, "%s holds nothing", w.what)
		case <-time.After(time.Until(closed.Add(2 * time.Second))):
			t.Fatalf("%s still waits 2 s after Close", w.what)
		}
	}
}

// Every call that needs the caller's hold (Unlock, Release, Token,
// Validity), given a context that carries no owner, fails with ErrNotHeld
// and says what to pass instead: the context the acquire returned.
func TestContractCallsThatNeedTheHoldNameAnOwnerlessContext(t *testing.T) {
	srv := redistest.Start(t)
	c := relock.New(srv.Client())
	t.Cleanup(func() { _ = c.Close() })
	needs := map[string]bool{}
	for _, k := range contractKinds {
		v := k.open(c, "ownerless:"+k.name)
		hold(t, v) // a hold exists: the context, not the lock, is the mistake
		for _, m := range ctxMethods(v) {
			if acquires[m] || changes[m] {
				continue
			}
			r := contractCall(v, m, context.Background(), 0, 0)
			if !errors.Is(r.err, relock.ErrNotHeld) {
				continue
			}
			needs[m] = true
			assert.Contains(t, r.err.Error(), "carries no owner; pass the context", "%s.%s", k.name, m)
		}
	}
	var names []string
	for m := range needs {
		names = append(names, m)
	}
	t.Logf("calls that need the hold: %s", strings.Join(names, ", "))
	for _, m := range []string{"Unlock", "Release", "Token", "Validity"} {
		assert.True(t, needs[m], "%s is among them", m)
	}
}

// An acquire with a context that never ends whose request is in flight when
// Close begins (its reply delayed 100 ms) is not obtained either, for every
// kind: it returns ErrNotObtained and ErrClientClosed once its reply is in,
// having released what the request took (nothing of the Client is left).
func TestContractCloseEndsAnUnboundedAcquireInFlight(t *testing.T) {
	srv := redistest.Start(t)
	faults := redistest.NewConnFaults()
	rdb := srv.Client()
	rdb.AddHook(faults)
	sent := &sendCounter{}
	rdb.AddHook(sent)
	c := relock.New(rdb, relock.WithLogger(quietLogger()))
	faults.SetDelay(redistest.CommandConn, 100*time.Millisecond)
	got := map[string]chan error{}
	for _, k := range contractKinds {
		if k.name == "CountDownLatch" { // a free latch's Wait returns at once
			continue
		}
		v := k.open(c, "unbounded:"+k.name)
		done := make(chan error, 1)
		got[k.name] = done
		go func() { done <- contractCall(v, blockingAcquire(v), context.Background(), 0, 0).err }()
	}
	require.Eventually(t, func() bool { return sent.n.Load() >= int64(len(got)) }, 5*time.Second, time.Millisecond,
		"every acquire's request is out")
	closed := time.Now()
	require.NoError(t, c.Close())
	for name, done := range got {
		select {
		case err := <-done:
			assert.ErrorIs(t, err, relock.ErrNotObtained, "%s", name)
			assert.ErrorIs(t, err, relock.ErrClientClosed, "%s", name)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s's acquire did not return after Close", name)
		}
	}
	t.Logf("every acquire returned %v after Close began", time.Since(closed))
	requireNothingOf(t, srv.Client(), c.ID(), 5*time.Second)
}

// sendCounter is a go-redis hook that counts the commands and pipelines
// sent.
type sendCounter struct{ n atomic.Int64 }

func (s *sendCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *sendCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.n.Add(1)
		return next(ctx, cmd)
	}
}
func (s *sendCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.n.Add(1)
		return next(ctx, cmds)
	}
}
