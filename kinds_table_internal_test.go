package relock

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/kinds"
	"github.com/relock-go/relock/internal/redistest"
)

// Every row that Inspect reports is complete, and the command's table
// (internal/kinds) holds the same kinds in the same order.
func TestKindTableRowsComplete(t *testing.T) {
	views := map[inspect.Kind]bool{}
	for _, k := range inspected {
		assert.False(t, views[k.view], "kind %s twice", k.view)
		views[k.view] = true
		assert.NotEmpty(t, k.typeName)
		assert.NotEmpty(t, k.events, "%s has no Observer kind", k.typeName)
		assert.NotEmpty(t, k.state, "%s has no state key", k.typeName)
		for _, s := range k.state {
			assert.Contains(t, []string{"hash", "zset", "string"}, s.typ, "%s: state key %q", k.typeName, s.suffix)
		}
		ok := k.decode != nil && k.summary != nil && k.force != nil && k.tool.Rows != nil // channels: optional
		assert.True(t, ok, "%s lacks a function", k.typeName)
	}
	require.Len(t, kinds.Table, len(inspected))
	for i, k := range inspected {
		assert.Equal(t, k.view, kinds.Table[i].View)
		assert.Equal(t, k.typeName, kinds.Table[i].Type)
		assert.NotNil(t, kinds.Table[i].Releases)
	}
	seen := map[Kind]bool{}
	for _, k := range Kinds() {
		assert.False(t, seen[k], "Observer kind %s twice", k)
		seen[k] = true
	}
}

// A row's state keys are the keys its type writes: the Key of its value.
func TestKindTableKeysAreTheKindsOwn(t *testing.T) {
	c := New(redistest.Start(t).Client())
	t.Cleanup(func() { _ = c.Close() })
	const name = "kinds/{keys}"
	ks, err := newKeyspace(c.opts.prefix, name)
	require.NoError(t, err)
	keyOf := map[string]string{
		"Lock":           c.Lock(name).Key(),
		"FairLock":       c.FairLock(name).Key(),
		"RWLock":         c.RWLock(name).Key(),
		"Semaphore":      c.Semaphore(name, 1).Key(),
		"CountDownLatch": c.CountDownLatch(name).Key(),
		"SpinLock":       c.SpinLock(name).Key(),
	}
	for _, k := range inspected {
		want, ok := keyOf[k.typeName]
		require.True(t, ok, "no Key for %s in this test", k.typeName)
		assert.Equal(t, want, ks.key(k.state[0].suffix), k.typeName)
		assert.Equal(t, k.view, kindOfSuffix[want[len(ks.base):]], k.typeName)
	}
	fair := rowOf(t, inspect.KindFairLock)
	assert.Equal(t, c.FairLock(name).QueueKey(), ks.key(fair.state[1].suffix))
}

// Every state key of every kind reads as absent when it is missing or has
// another Redis type than the kind writes: no kind then exists, and the
// command has no row and no release for it.
func TestInspectWrongTypedStateKeys(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	const name = "kinds/wrongtype"
	ks, err := newKeyspace(c.opts.prefix, name)
	require.NoError(t, err)

	check := func(what string) {
		t.Helper()
		st, err := c.Inspect(ctx, name)
		require.NoError(t, err, what)
		assert.False(t, st.Exists(), what)
		assert.Empty(t, summarize(st), what)
		for _, k := range kinds.Table {
			assert.Empty(t, k.Rows(st), what)
			assert.Empty(t, k.Releases(c, name, st), what)
		}
	}
	check("no keys")
	for _, k := range inspected {
		for _, s := range k.state {
			key := ks.key(s.suffix)
			if s.typ == "hash" {
				require.NoError(t, rdb.Set(ctx, key, "x", 0).Err())
			} else {
				require.NoError(t, rdb.HSet(ctx, key, "x", "1").Err())
			}
		}
	}
	check("every key of the wrong type")
	list, err := c.ListLocks(ctx, name)
	require.NoError(t, err)
	assert.Empty(t, list)
}

func rowOf(t *testing.T, view inspect.Kind) kindRow {
	t.Helper()
	for _, k := range inspected {
		if k.view == view {
			return k
		}
	}
	t.Fatalf("no row for %s", view)
	return kindRow{}
}

// One name held as every kind at once: Inspect, ListLocks and the command's
// rows show each kind, in the table's order, and the command's force
// releases free every one of them, leaving no state.
func TestEveryKindThroughTheTable(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	const name = "kinds/all"
	_, err := c.Lock(name).Lock(ctx)
	require.NoError(t, err)
	_, err = c.FairLock(name).Lock(ctx)
	require.NoError(t, err)
	_, err = c.RWLock(name).ReadLock().Lock(ctx)
	require.NoError(t, err)
	_, err = c.Semaphore(name, 3).Acquire(ctx, 2)
	require.NoError(t, err)
	ok, err := c.CountDownLatch(name).TrySetCount(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = c.SpinLock(name).Lock(ctx)
	require.NoError(t, err)

	var views []inspect.Kind
	for _, k := range inspected {
		views = append(views, k.view)
	}
	st, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, views, st.Kinds())
	list, err := c.ListLocks(ctx, name)
	require.NoError(t, err)
	var listed []inspect.Kind
	for _, s := range list {
		listed = append(listed, s.Kind)
	}
	assert.Equal(t, views, listed)
	ch, err := c.Channels(name)
	require.NoError(t, err)
	for _, k := range kinds.Table {
		assert.NotEmpty(t, k.Rows(st), k.Type)
		if k.Watched != nil {
			for _, w := range k.Watched(ch) {
				assert.NotEmpty(t, w, k.Type)
			}
		}
		rs := k.Releases(c, name, st)
		require.NotEmpty(t, rs, k.Type)
		for _, r := range rs {
			done, err := r.Do(ctx)
			require.NoError(t, err, k.Type)
			assert.True(t, done, k.Type)
		}
	}
	st, err = c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.False(t, st.Exists(), "force releases left %v", st.Kinds())
}

// Every kind with holds has a guarded force release (ForceUnlockIf, or a
// Semaphore's ForceReleaseIf); a kind without one says why here and in
// docs/kinds.md. A kind added to the table fails this test until it does
// one or the other.
func TestKindTableEveryKindHasAGuardedForceRelease(t *testing.T) {
	guarded := map[string][]any{
		"Lock": {(*Lock)(nil)}, "FairLock": {(*FairLock)(nil)}, "RWLock": {(*ReadLock)(nil), (*WriteLock)(nil)},
		"RedLock": {(*RedLock)(nil)}, "Semaphore": {(*Semaphore)(nil)}, "SpinLock": {(*SpinLock)(nil)},
	}
	why := map[string]string{
		"MultiLock":      "its parts are Locks, each forced on its own",
		"CountDownLatch": "it has no holder: Delete, or force-unlock --delete-latch",
	}
	for _, k := range kindTable {
		types, ok := guarded[k.typeName]
		if !ok {
			assert.NotEmpty(t, why[k.typeName], "%s has no guarded force release and no reason", k.typeName)
			continue
		}
		for _, v := range types {
			typ := reflect.TypeOf(v)
			_, unlock := typ.MethodByName("ForceUnlockIf")
			_, release := typ.MethodByName("ForceReleaseIf")
			assert.True(t, unlock || release, "%v has no guarded force release", typ)
		}
	}
}
