package relock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// A call handed to the workers while one of them waits runs on that one:
// no goroutine is started per call. At Close the idle workers end.
func TestWorkersReuseAnIdleWorkerAndEndAtClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	closing := make(chan struct{})
	w := newWorkers(closing)
	ran := make(chan int, 3)
	w.run(func() { ran <- 1 })
	require.Equal(t, 1, <-ran)
	// Once the worker that ran it waits, run hands it the next call rather
	// than starting another.
	require.Eventually(t, func() bool {
		before := w.started.Load()
		w.run(func() { ran <- 2 })
		return <-ran == 2 && w.started.Load() == before
	}, time.Second, time.Millisecond, "a call runs on an idle worker")

	// A call made while none waits starts a worker of its own at once.
	block := make(chan struct{})
	w.run(func() { <-block; ran <- 3 })
	w.run(func() { ran <- 4 })
	assert.Equal(t, 4, <-ran, "the second call does not wait for the first")
	close(block)
	assert.Equal(t, 3, <-ran)
	close(closing) // VerifyNone: every worker ends
}

// An idle worker ends by itself after workerIdle (up to twice that).
func TestWorkerEndsWhenIdle(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	w := newWorkers(make(chan struct{})) // never closed
	ran := make(chan struct{})
	w.run(func() { close(ran) })
	<-ran
	start := time.Now()
	require.Error(t, goleak.Find(ignore), "the worker waits for a next call first")
	assert.Eventually(t, func() bool { return goleak.Find(ignore) == nil }, 5*workerIdle, 50*time.Millisecond, "the idle worker ends")
	assert.GreaterOrEqual(t, time.Since(start), workerIdle/2, "not before it was idle a while")
}
