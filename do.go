package relock

import "context"

// Do is the scoped form of Lock and Unlock: it locks, runs fn with the hold
// context, and always unlocks — also when fn panics — so a hold can neither
// leak nor be released with the wrong context. When Lock fails, fn does not
// run and Lock's error is returned. When fn fails, its error is returned,
// joined (errors.Join) with Unlock's if that failed too. When fn succeeds and
// only Unlock fails, the error is a *ReleaseError: errors.As tells "fn's work
// is done" apart from "fn failed". A panicking fn is unlocked after, and the
// panic goes on. fn should watch ctx.Done(): the hold context ends when the
// lock is lost.
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
