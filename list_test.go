package relock_test

// ListLocks: every kind of lock of a name, found by SCAN on one Redis and
// on every master of a Cluster, each with its owners named.

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/inspect"
	"github.com/relock-go/relock/internal/redistest"
)

// ListLocks lists each lock of a name, by kind, with its owners and their
// Clients' names; a name whose lock ended is not listed.
func TestListLocks(t *testing.T) {
	b := newReal(t)
	testListLocks(t, b.rdb)
}

func TestListLocksCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	testListLocks(t, cl.Client())
}

func testListLocks(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	c := relock.New(rdb, relock.WithKeyPrefix("lst"), relock.WithName("lister"))
	t.Cleanup(func() { _ = c.Close() })
	peer := relock.New(rdb, relock.WithKeyPrefix("lst"), relock.WithName("peer-1")) // the RWLocks' reader
	t.Cleanup(func() { _ = peer.Close() })
	other := relock.New(rdb) // default prefix: not listed
	t.Cleanup(func() { _ = other.Close() })

	names := []string{"list/a1", "list/a2", "list/{b}", "list/50%", "list/c*d", "zz"}
	var held []func()
	for i, name := range names {
		switch i % 3 {
		case 0:
			hctx, err := c.Lock(name).Lock(ctx)
			require.NoError(t, err)
			held = append(held, func() { require.NoError(t, c.Lock(name).Unlock(hctx)) })
		case 1:
			hctx, err := c.FairLock(name).Lock(ctx)
			require.NoError(t, err)
			held = append(held, func() { require.NoError(t, c.FairLock(name).Unlock(hctx)) })
		case 2:
			hctx, err := peer.RWLock(name).ReadLock().Lock(ctx)
			require.NoError(t, err)
			held = append(held, func() { require.NoError(t, peer.RWLock(name).ReadLock().Unlock(hctx)) })
		}
	}
	require.Eventually(t, func() bool { return rdb.Exists(ctx, "lst:client:{"+peer.ID()+"}").Val() == 1 },
		5*time.Second, time.Millisecond, "the peer never recorded its name")
	// Two kinds under one name.
	wctx, err := c.RWLock("list/a1").WriteLock().Lock(ctx)
	require.NoError(t, err)
	held = append(held, func() { require.NoError(t, c.RWLock("list/a1").WriteLock().Unlock(wctx)) })
	octx, err := other.Lock("list/a1").Lock(ctx)
	require.NoError(t, err)
	held = append(held, func() { require.NoError(t, other.Lock("list/a1").Unlock(octx)) })
	// A lock that ended leaves keys that are no lock.
	ectx, err := c.Lock("list/ended").Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Lock("list/ended").Unlock(ectx))

	all, err := c.ListLocks(ctx, "")
	require.NoError(t, err)
	type nk struct {
		name string
		kind inspect.Kind
	}
	var got []nk
	for _, s := range all {
		got = append(got, nk{s.Name, s.Kind})
		assert.Equal(t, 1, s.Holders, s.Name)
		require.Len(t, s.Owners, 1, s.Name)
		want := "lister"
		if s.Kind == inspect.KindRWLock && s.Name != "list/a1" {
			want = "peer-1" // read from its record
		}
		assert.Equal(t, want, s.Owners[0].Name, "%s %s names its owner's Client", s.Name, s.Kind)
		assert.NotEmpty(t, s.Owners[0].Owner, s.Name)
		assert.Zero(t, s.Waiters, s.Name)
		assert.Greater(t, s.Lease, time.Duration(0), s.Name)
		if s.Kind != inspect.KindRWLock || s.Name == "list/a1" {
			assert.NotZero(t, s.Token, "%s %s", s.Name, s.Kind)
		}
	}
	assert.Equal(t, []nk{
		{"list/50%", inspect.KindLock},
		{"list/a1", inspect.KindLock},
		{"list/a1", inspect.KindRWLock},
		{"list/a2", inspect.KindFairLock},
		{"list/c*d", inspect.KindFairLock},
		{"list/{b}", inspect.KindRWLock},
		{"zz", inspect.KindRWLock},
	}, got)

	names2 := func(pattern string) []string {
		t.Helper()
		ls, err := c.ListLocks(ctx, pattern)
		require.NoError(t, err)
		var out []string
		for _, s := range ls {
			out = append(out, s.Name+"/"+string(s.Kind))
		}
		return out
	}
	assert.Equal(t, []string{"list/a1/lock", "list/a1/rwlock", "list/a2/fairlock"}, names2("list/a*"))
	assert.Equal(t, []string{"list/{b}/rwlock"}, names2("list/{b}"))
	assert.Equal(t, []string{"list/50%/lock"}, names2("*%"))
	assert.Equal(t, []string{"list/c*d/fairlock"}, names2(`list/c\*d`))
	assert.Empty(t, names2("nothing*"))

	for _, f := range held {
		f()
	}
	all, err = c.ListLocks(ctx, "*")
	require.NoError(t, err)
	assert.Empty(t, all)
}
