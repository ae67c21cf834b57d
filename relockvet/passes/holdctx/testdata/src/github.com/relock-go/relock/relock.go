// Package relock is a stub of github.com/relock-go/relock for the analyzer's
// tests: the same method signatures, no behaviour.
package relock

import (
	"context"
	"time"
)

type Client struct{}

// Lock returns a lock handle; it is not an acquisition and is never reported.
func (c *Client) Lock(name string) *Lock                                { return &Lock{} }
func (c *Client) FairLock(name string) *FairLock                        { return &FairLock{} }
func (c *Client) RWLock(name string) *RWLock                            { return &RWLock{} }
func NewMultiLock(locks ...*Lock) *MultiLock                            { return &MultiLock{} }
func NewRedLock(name string, cs []*Client) *RedLock                     { return &RedLock{} }
func NewOwner(ctx context.Context) context.Context                      { return ctx }
func WithOwner(ctx context.Context, id string) (context.Context, error) { return ctx, nil }

type Lock struct{}

func (l *Lock) Lock(ctx context.Context) (context.Context, error) { return ctx, nil }
func (l *Lock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return ctx, nil
}
func (l *Lock) Unlock(ctx context.Context) error                            { return nil }
func (l *Lock) Do(ctx context.Context, f func(context.Context) error) error { return f(ctx) }
func (l *Lock) HoldCount(ctx context.Context) (int, error)                  { return 0, nil }

type FairLock struct{}

func (l *FairLock) Lock(ctx context.Context) (context.Context, error) { return ctx, nil }
func (l *FairLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return ctx, nil
}
func (l *FairLock) Unlock(ctx context.Context) error                            { return nil }
func (l *FairLock) Do(ctx context.Context, f func(context.Context) error) error { return f(ctx) }

type RWLock struct{}

func (r *RWLock) ReadLock() *ReadLock   { return &ReadLock{} }
func (r *RWLock) WriteLock() *WriteLock { return &WriteLock{} }

type ReadLock struct{}

func (l *ReadLock) Lock(ctx context.Context) (context.Context, error) { return ctx, nil }
func (l *ReadLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return ctx, nil
}
func (l *ReadLock) Unlock(ctx context.Context) error                            { return nil }
func (l *ReadLock) Do(ctx context.Context, f func(context.Context) error) error { return f(ctx) }

type WriteLock struct{}

func (l *WriteLock) Lock(ctx context.Context) (context.Context, error) { return ctx, nil }
func (l *WriteLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return ctx, nil
}
func (l *WriteLock) Unlock(ctx context.Context) error                            { return nil }
func (l *WriteLock) Do(ctx context.Context, f func(context.Context) error) error { return f(ctx) }

type MultiLock struct{}

func (l *MultiLock) Lock(ctx context.Context) (context.Context, error) { return ctx, nil }
func (l *MultiLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return ctx, nil
}
func (l *MultiLock) Unlock(ctx context.Context) error                            { return nil }
func (l *MultiLock) Do(ctx context.Context, f func(context.Context) error) error { return f(ctx) }

type RedLock struct{}

func (l *RedLock) Lock(ctx context.Context) (context.Context, error) { return ctx, nil }
func (l *RedLock) TryLock(ctx context.Context, wait, lease time.Duration) (context.Context, error) {
	return ctx, nil
}
func (l *RedLock) Unlock(ctx context.Context) error                            { return nil }
func (l *RedLock) Do(ctx context.Context, f func(context.Context) error) error { return f(ctx) }

func (c *Client) Semaphore(name string, permits int) *Semaphore { return &Semaphore{} }

type Semaphore struct{}

func (s *Semaphore) Acquire(ctx context.Context, n int) (context.Context, error) { return ctx, nil }
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait, lease time.Duration) (context.Context, error) {
	return ctx, nil
}
func (s *Semaphore) Release(ctx context.Context) error { return nil }
func (s *Semaphore) Do(ctx context.Context, n int, f func(context.Context) error) error {
	return f(ctx)
}
func (s *Semaphore) ForceRelease(ctx context.Context) (bool, error) { return false, nil }
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error)       { return false, nil }
func (l *Lock) Token(ctx context.Context) (int64, error)            { return 0, nil }
func (l *Lock) IsLocked(ctx context.Context) (bool, error)          { return false, nil }
func (l *FairLock) Token(ctx context.Context) (int64, error)        { return 0, nil }
func (w *WriteLock) Token(ctx context.Context) (int64, error)       { return 0, nil }
func (c *Client) Close() error                                      { return nil }
