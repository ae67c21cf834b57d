package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of real redis-server processes on loopback.
type Cluster struct {
	t     testing.TB
	Nodes []*Server
	mu    sync.Mutex
	ctl   map[string]*redis.Client // per node, for the harness's own queries
}

// control returns a client of a running node.
func (c *Cluster) control() *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctl == nil {
		c.ctl = make(map[string]*redis.Client)
	}
	for _, s := range c.Nodes {
		if s.Running() {
			if c.ctl[s.Addr()] == nil {
				c.ctl[s.Addr()] = s.Client()
			}
			return c.ctl[s.Addr()]
		}
	}
	c.t.Fatal("redistest: no cluster node is running")
	return nil
}

// clusterNodeTimeout is short so that a failed node is noticed in about a
// second, should a test kill one; the nodes never run on a slow network.
const clusterNodeTimeout = "1000"

// StartCluster starts masters × (1 + replicasPerMaster) cluster-enabled
// redis-server processes, joins them with redis-cli --cluster create and
// waits until every node reports cluster_state:ok and the same slot map. The
// processes are stopped when t ends. Extra args go to every node.
func StartCluster(t testing.TB, masters, replicasPerMaster int, args ...string) *Cluster {
	t.Helper()
	cli := Binary(t, "redis-cli")
	n := masters * (1 + replicasPerMaster)
	c := &Cluster{t: t}
	nodeArgs := append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", clusterNodeTimeout,
		// A node learns its own address from its peers; a lone node has
		// none and would report "" in CLUSTER SLOTS.
		"--cluster-announce-ip", "127.0.0.1",
		// A replica must be able to take over however recently it synced.
		"--cluster-replica-validity-factor", "0",
		// Replicas sync at once instead of after the default 5 s.
		"--repl-diskless-sync-delay", "0",
	}, args...)
	for range n {
		c.Nodes = append(c.Nodes, Start(t, nodeArgs...))
	}
	if masters == 1 && replicasPerMaster == 0 {
		// redis-cli refuses a one-node cluster; assign the slots by hand.
		if err := c.Nodes[0].Client().ClusterAddSlotsRange(context.Background(), 0, 16383).Err(); err != nil {
			t.Fatalf("redistest: cluster addslotsrange: %v", err)
		}
	} else {
		cmdArgs := []string{"--cluster", "create"}
		for _, s := range c.Nodes {
			cmdArgs = append(cmdArgs, s.Addr())
		}
		cmdArgs = append(cmdArgs, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
		out, err := exec.Command(cli, cmdArgs...).CombinedOutput()
		if err != nil {
			t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
		}
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// WaitHealthy waits until every running node reports cluster_state:ok, every
// replica is in sync, and all nodes agree on which node serves each slot
// range, every one of them a running node: after a master is killed, it
// waits for the failover.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if last = c.unhealthy(ctx); last == "" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("cluster not healthy after %v: %s\n%s", timeout, last, c.describe(ctx))
}

// unhealthy returns why the cluster is not ready yet, or "".
func (c *Cluster) unhealthy(ctx context.Context) string {
	var ref string
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			_ = rdb.Close()
			return fmt.Sprintf("%s: %v", s.Addr(), err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			_ = rdb.Close()
			return s.Addr() + ": cluster_state not ok"
		}
		// A replica that has not synced yet cannot take over from its master.
		repl, err := Info(ctx, rdb, "replication")
		if err != nil || (repl["role"] == "slave" && repl["master_link_status"] != "up") {
			_ = rdb.Close()
			return fmt.Sprintf("%s: replica not in sync (%v)", s.Addr(), err)
		}
		slots, err := rdb.ClusterSlots(ctx).Result()
		_ = rdb.Close()
		if err != nil {
			return fmt.Sprintf("%s: %v", s.Addr(), err)
		}
		for _, sl := range slots {
			if m, err := c.byAddr(sl.Nodes[0].Addr); err != nil || !m.Running() {
				return fmt.Sprintf("slots %d-%d are still assigned to dead %s", sl.Start, sl.End, sl.Nodes[0].Addr)
			}
		}
		m := slotMap(slots)
		if ref == "" {
			ref = m
		} else if m != ref {
			return fmt.Sprintf("%s sees slots %s, another node %s", s.Addr(), m, ref)
		}
	}
	return ""
}

// slotMap renders CLUSTER SLOTS canonically: ranges in order, each with its
// master and its sorted replicas.
func slotMap(slots []redis.ClusterSlot) string {
	parts := make([]string, len(slots))
	for i, s := range slots {
		var replicas []string
		for _, n := range s.Nodes[1:] {
			replicas = append(replicas, n.Addr)
		}
		// A dead replica stays listed until it is forgotten; what matters is
		// that every node agrees, which a sorted list shows.
		sort.Strings(replicas)
		parts[i] = fmt.Sprintf("%05d-%05d:%s%v", s.Start, s.End, s.Nodes[0].Addr, replicas)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Addrs returns the address of every node.
func (c *Cluster) Addrs() []string { return addrs(c.Nodes) }

// Client returns a go-redis Cluster client of the cluster, closed when t
// ends.
func (c *Cluster) Client(opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs()}
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewClusterClient(o)
	c.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// MasterOf returns the node that serves key's slot, as the nodes themselves
// report it (CLUSTER SLOTS), not as a client believes.
func (c *Cluster) MasterOf(ctx context.Context, key string) (*Server, error) {
	rdb := c.control()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			return c.byAddr(s.Nodes[0].Addr)
		}
	}
	return nil, fmt.Errorf("slot %d of %q is not served", slot, key)
}

// Masters returns the nodes that serve slots.
func (c *Cluster) Masters(ctx context.Context) ([]*Server, error) {
	slots, err := c.control().ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []*Server
	seen := map[string]bool{}
	for _, s := range slots {
		addr := s.Nodes[0].Addr
		if seen[addr] {
			continue
		}
		seen[addr] = true
		srv, err := c.byAddr(addr)
		if err != nil {
			return nil, err
		}
		out = append(out, srv)
	}
	return out, nil
}

func (c *Cluster) byAddr(addr string) (*Server, error) {
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no node at %s", addr)
}

// describe returns CLUSTER NODES as a running node sees it, for failures.
func (c *Cluster) describe(ctx context.Context) string {
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		out, err := rdb.ClusterNodes(ctx).Result()
		_ = rdb.Close()
		if err == nil {
			return "CLUSTER NODES at " + s.Addr() + ":\n" + out
		}
	}
	return "no node answers"
}
