package relock

import "context"

// Do runs fn under the lock with the hold context, unlocking even on panic.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, l.Lock, l.Unlock, fn)
}

// Do is Lock.Do.
func (l *FairLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, l.Lock, l.Unlock, fn)
}

// Do is Lock.Do for a read hold.
func (r *ReadLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, r.Lock, r.Unlock, fn)
}

// Do is Lock.Do for the write hold.
func (w *WriteLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, w.Lock, w.Unlock, fn)
}

// Do is Lock.Do for every part.
func (m *MultiLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, m.Lock, m.Unlock, fn)
}

// Do is Lock.Do.
func (r *RedLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, r.Lock, r.Unlock, fn)
}
