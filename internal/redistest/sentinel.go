package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name under which the Sentinels of StartSentinel monitor
// the primary.
const MasterName = "relock-primary"

// Sentinel is a Sentinel-managed deployment: one primary, its replicas and
// the redis-sentinel processes that watch them, all real processes on
// loopback.
type Sentinel struct {
	t         testing.TB
	Primary   *Server
	Replicas  []*Server
	Sentinels []*Server
}

// Sentinel timing: the primary is declared down after downAfter of silence;
// a failover that stalls is retried after failoverTimeout. Short, so that a
// test's failover takes a couple of seconds.
const (
	downAfter       = 500
	failoverTimeout = 2000
)

// StartSentinel starts a primary, replicas replicas of it and sentinels
// redis-sentinel processes (quorum: a majority), and waits until the replicas
// are in sync and every Sentinel knows every replica and every other
// Sentinel, so that a failover can happen as soon as the test wants one.
func StartSentinel(t testing.TB, replicas, sentinels int) *Sentinel {
	t.Helper()
	bin := Binary(t, "redis-sentinel")
	// Replicas sync at once instead of after the default 5 s.
	d := &Sentinel{t: t, Primary: Start(t, "--repl-diskless-sync-delay", "0")}
	for range replicas {
		d.Replicas = append(d.Replicas, Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(d.Primary.Port()), "--repl-diskless-sync-delay", "0"))
	}
	quorum := sentinels/2 + 1
	for range sentinels {
		s := &Server{t: t, bin: bin, dir: t.TempDir()}
		s.conf = filepath.Join(s.dir, "sentinel.conf")
		conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n"+
			"sentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s %d\n"+
			"sentinel parallel-syncs %s 1\n",
			MasterName, d.Primary.Port(), quorum,
			MasterName, downAfter, MasterName, failoverTimeout, MasterName)
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			t.Fatalf("redistest: sentinel config: %v", err)
		}
		d.Sentinels = append(d.Sentinels, launch(t, s))
	}
	if err := d.waitReady(sentinels-1, replicas, 30*time.Second); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return d
}

// SentinelAddrs returns the addresses of the Sentinels.
func (d *Sentinel) SentinelAddrs() []string { return addrs(d.Sentinels) }

// Client returns a go-redis failover client (it finds the primary through
// the Sentinels and follows failovers), closed when t ends.
func (d *Sentinel) Client(opts ...func(*redis.FailoverOptions)) *redis.Client {
	o := &redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: d.SentinelAddrs()}
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewFailoverClient(o)
	d.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// PrimaryAddr asks every Sentinel for the primary's address and returns it
// when they all agree.
func (d *Sentinel) PrimaryAddr(ctx context.Context) (string, error) {
	var addr string
	for _, s := range d.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		got, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
		_ = sc.Close()
		if err != nil {
			return "", fmt.Errorf("sentinel %s: %w", s.Addr(), err)
		}
		a := got[0] + ":" + got[1]
		if addr != "" && a != addr {
			return "", fmt.Errorf("sentinels disagree: %s and %s", addr, a)
		}
		addr = a
	}
	return addr, nil
}

// WaitFailover waits until every Sentinel names a primary other than old
// and that server reports role:master, and returns it.
func (d *Sentinel) WaitFailover(old *Server, timeout time.Duration) (*Server, error) {
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		addr, err := d.PrimaryAddr(ctx)
		if err == nil && addr != old.Addr() {
			for _, s := range d.Replicas {
				if s.Addr() != addr {
					continue
				}
				if role, err := role(ctx, s); err != nil || role != "master" {
					last = fmt.Errorf("%s is named primary but has role %q (%v)", addr, role, err)
					break
				}
				return s, nil
			}
		} else if err != nil {
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("no failover within %v: %v", timeout, last)
}

func role(ctx context.Context, s *Server) (string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	info, err := Info(ctx, rdb, "replication")
	return info["role"], err
}

// waitReady waits until the replicas are in sync and every Sentinel knows
// the others and every replica.
func (d *Sentinel) waitReady(peers, replicas int, timeout time.Duration) error {
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var why string
	for time.Now().Before(deadline) {
		if why = d.notReady(ctx, peers, replicas); why == "" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("sentinel deployment not ready after %v: %s", timeout, why)
}

func (d *Sentinel) notReady(ctx context.Context, peers, replicas int) string {
	for _, s := range d.Replicas {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		info, err := Info(ctx, rdb, "replication")
		_ = rdb.Close()
		if err != nil || info["master_link_status"] != "up" {
			return fmt.Sprintf("replica %s not in sync (%v)", s.Addr(), err)
		}
	}
	for _, s := range d.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		others, err1 := sc.Sentinels(ctx, MasterName).Result()
		reps, err2 := sc.Replicas(ctx, MasterName).Result()
		_ = sc.Close()
		if err1 != nil || err2 != nil {
			return fmt.Sprintf("sentinel %s: %v %v", s.Addr(), err1, err2)
		}
		if len(others) < peers || len(reps) < replicas {
			return fmt.Sprintf("sentinel %s knows %d sentinels and %d replicas", s.Addr(), len(others), len(reps))
		}
	}
	return ""
}
