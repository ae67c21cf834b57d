package relock

import "context"

// Do locks, runs fn with the hold context and unlocks, also when fn panics
// (the panic goes on). When Lock fails, fn does not run and Lock's error is
// returned. When fn fails, its error is returned, joined with Unlock's if
// that failed too; when only Unlock fails, the error is a *ReleaseError.
// fn should watch ctx.Done(): the hold context ends when the lock is lost.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, l.Lock, l.Unlock, fn)
}

// Do runs fn while holding the fair lock (see Lock.Do).
func (l *FairLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, l.Lock, l.Unlock, fn)
}

// Do runs fn while holding a read hold (see Lock.Do).
func (r *ReadLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, r.Lock, r.Unlock, fn)
}

// Do runs fn while holding the write hold (see Lock.Do).
func (w *WriteLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, w.Lock, w.Unlock, fn)
}

// Do runs fn while holding every part (see Lock.Do).
func (m *MultiLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, m.Lock, m.Unlock, fn)
}

// Do runs fn while holding the RedLock (see Lock.Do).
func (r *RedLock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return doWith(ctx, r.Lock, r.Unlock, fn)
}
