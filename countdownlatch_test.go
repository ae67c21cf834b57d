package relock_test

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

func TestCountDownLatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		c := b.newClient(t)
		l := c.CountDownLatch("start")
		n, err := l.Count(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		require.NoError(t, l.Wait(ctx), "a latch never set is open")

		set, err := l.TrySetCount(ctx, 2)
		require.NoError(t, err)
		assert.True(t, set)
		set, err = l.TrySetCount(ctx, 5)
		require.NoError(t, err)
		assert.False(t, set, "closed already: unchanged")
		n, _ = l.Count(ctx)
		assert.Equal(t, 2, n)

		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err = l.Wait(short)
		require.ErrorIs(t, err, relock.ErrNotObtained)
		require.ErrorIs(t, err, context.DeadlineExceeded)

		require.NoError(t, l.CountDown(ctx))
		n, _ = l.Count(ctx)
		assert.Equal(t, 1, n)
		require.NoError(t, l.CountDown(ctx))
		n, _ = l.Count(ctx)
		assert.Equal(t, 0, n)
		require.NoError(t, l.Wait(ctx))
		require.NoError(t, l.CountDown(ctx), "on an open latch: nothing")
		assert.Empty(t, keysLeft(t, b.rdb), "an open latch leaves nothing but its mark, which expires")
	})
}

func TestCountDownLatchBadInput(t *testing.T) {
	b := newMini(t)
	ctx := context.Background()
	c := b.newClient(t)
	for _, n := range []int{0, -1} {
		_, err := c.CountDownLatch("x").TrySetCount(ctx, n)
		assert.ErrorIs(t, err, relock.ErrInvalidArgument)
	}
	assert.ErrorIs(t, c.CountDownLatch("").CountDown(ctx), relock.ErrInvalidArgument)
	//nolint:staticcheck // a nil context is the bad input under test
	assert.ErrorIs(t, c.CountDownLatch("x").Wait(nil), relock.ErrInvalidArgument)
	assert.Empty(t, allKeys(t, b.rdb))
}

// A CountDown whose reply is lost is resent by go-redis and counts once.
func TestCountDownLatchReplayCountsOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	d := redistest.NewReplyDropper()
	rdb.AddHook(d)
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	l := c.CountDownLatch("replay")
	_, err := l.TrySetCount(ctx, 3)
	require.NoError(t, err)
	d.Arm("evalsha", 1)
	require.NoError(t, l.CountDown(ctx))
	require.Equal(t, int64(1), d.Dropped(), "the reply was lost and the request resent")
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

// Waiters are woken by the CountDown that opens the latch, on the shared
// subscriber: all of them, at once, not by a timer.
func TestCountDownLatchWakesWaiters(t *testing.T) {
	b := newReal(t)
	ctx := context.Background()
	c := b.newClient(t, relock.WithWatchdogLease(time.Minute)) // the fallback re-check is a minute away
	l := c.CountDownLatch("wake")
	_, err := l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	const waiters = 5
	done := make(chan time.Time, waiters)
	for range waiters {
		go func() {
			assert.NoError(t, l.Wait(ctx))
			done <- time.Now()
		}()
	}
	require.Eventually(t, func() bool { return c.SubscribedChannels() == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // every waiter asleep on it
	opened := time.Now()
	require.NoError(t, c.CountDownLatch("wake").CountDown(ctx))
	for range waiters {
		select {
		case at := <-done:
			assert.Less(t, at.Sub(opened), time.Second, "woken by the message, not the minute's re-check")
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter was not woken")
		}
	}
}

// 3 processes count down; a waiter in a 4th returns within 100 ms of the
// last CountDown.
func TestCountDownLatchAcrossProcesses(t *testing.T) {
	redistest.Binary(t, "redis-server")
	bin := filepath.Join(t.TempDir(), "holderproc")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/holderproc").CombinedOutput()
	require.NoError(t, err, "%s", out)
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	c := relock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := c.CountDownLatch("procs")
	_, err = l.TrySetCount(ctx, 3)
	require.NoError(t, err)

	waiter := startLatchProc(t, bin, srv.Addr(), "wait")
	require.Eventually(t, func() bool {
		n, err := rdb.PubSubNumSub(ctx, "relock:{procs}:latch:ch").Result()
		return err == nil && n["relock:{procs}:latch:ch"] == 1
	}, 10*time.Second, 5*time.Millisecond, "the waiter listens")
	var counters []*latchProc
	for range 3 {
		counters = append(counters, startLatchProc(t, bin, srv.Addr(), "count"))
	}
	var last int64
	for _, p := range counters {
		_, err := io.WriteString(p.stdin, "go\n")
		require.NoError(t, err)
		last = max(last, p.stamp(t, "counted"))
	}
	opened := waiter.stamp(t, "opened")
	lag := time.Duration(opened - last)
	t.Logf("the waiter returned %v after the last CountDown was sent", lag)
	assert.Less(t, lag, 100*time.Millisecond)
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
}

type latchProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func startLatchProc(t *testing.T, bin, addr, role string) *latchProc {
	cmd := exec.Command(bin, "-kind", "latch", "-role", role, "-addr", addr, "-name", "procs")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	redistest.DieWithParent(cmd)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &latchProc{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
}

// stamp reads the process's line "<word> <unix ns>".
func (p *latchProc) stamp(t *testing.T, word string) int64 {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if p.lines.Scan() {
			got <- p.lines.Text()
		}
		close(got)
	}()
	select {
	case line := <-got:
		w, ns, _ := strings.Cut(line, " ")
		require.Equal(t, word, w, "line %q", line)
		n, err := strconv.ParseInt(ns, 10, 64)
		require.NoError(t, err)
		return n
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q line", word)
	}
	return 0
}
