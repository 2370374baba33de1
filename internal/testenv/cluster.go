package testenv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions configure StartCluster. The zero value is three masters
// without replicas.
type ClusterOptions struct {
	// Replicas is the number of replicas of each of the three masters.
	Replicas int
}

// Cluster is a Redis Cluster of three masters, each serving a third of the
// slots, and their replicas (node timeout 2 s, full coverage required).
type Cluster struct {
	// Nodes are the masters first (Nodes[0..2]), then the replicas:
	// Nodes[3+3*k+i] replicates Nodes[i]. After a failover the roles move;
	// the nodes stay.
	Nodes []*Redis
}

// clusterBusOffset is where a cluster node's bus listens, relative to its
// port (Redis's default). A bus port taken by another process aborts the
// node's start ("Failed listening on port … (cluster)"), so both are
// checked free.
const clusterBusOffset = 10000

// StartCluster starts the nodes on free loopback ports, each under a
// tb.TempDir() of its own, forms the cluster and returns once every node
// sees all slots served and every replica linked.
func StartCluster(tb TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	n := 3 * (1 + opts.Replicas)
	c := &Cluster{}
	for range n {
		r := newRedis(tb, RedisOptions{}, "cluster node", clusterBusOffset)
		r.p.args = append(r.p.args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(r.Dir, "nodes.conf"),
			"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "yes")
		c.Nodes = append(c.Nodes, r)
	}
	for _, r := range c.Nodes {
		if err := r.p.start(); err != nil {
			r.p.fail(tb, err)
		}
	}
	for _, r := range c.Nodes {
		if err := r.p.waitReady(30*time.Second, r.ping); err != nil {
			r.p.fail(tb, err)
		}
	}
	if err := c.form(); err != nil {
		tb.Fatalf("testenv: forming the cluster %s: %v\n%s", strings.Join(c.Addrs(), ","), err, c.Nodes[0].p.tail(20))
	}
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		tb.Fatalf("testenv: %v\n%s", err, c.Nodes[0].p.tail(20))
	}
	return c
}

// Addrs returns every node's address, masters first.
func (c *Cluster) Addrs() []string { return addrsOf(c.Nodes) }

// Node returns the node at addr, or nil.
func (c *Cluster) Node(addr string) *Redis {
	for _, r := range c.Nodes {
		if r.Addr == addr {
			return r
		}
	}
	return nil
}

// form gives each master its slots and a config epoch of its own, has
// every node meet the first, and then attaches the replicas.
func (c *Cluster) form() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(c.Nodes))
	for i, r := range c.Nodes {
		clients[i] = redis.NewClient(r.Options())
		defer clients[i].Close()
	}
	const slots = 16384
	for i := range 3 {
		from, to := i*slots/3, (i+1)*slots/3-1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", from, to).Err(); err != nil {
			return err
		}
		if err := clients[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return err
		}
	}
	for _, r := range c.Nodes[1:] {
		host, port := splitAddr(r.Addr)
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return err
		}
	}
	if err := poll(ctx, func() error {
		for i, cl := range clients {
			if got := clusterInfo(ctx, cl, "cluster_known_nodes"); got != fmt.Sprint(len(clients)) {
				return fmt.Errorf("node %s knows %s nodes", c.Nodes[i].Addr, got)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for i := 3; i < len(clients); i++ {
		id, err := clients[(i-3)%3].ClusterMyID(ctx).Result()
		if err != nil {
			return err
		}
		if err := clients[i].ClusterReplicate(ctx, id).Err(); err != nil {
			return err
		}
	}
	return nil
}

// WaitHealthy waits until every node is up with cluster_state ok, knows
// every node and sees all slots assigned, and every replica's link to its
// master is up.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := poll(ctx, func() error {
		for _, r := range c.Nodes {
			if err := clusterNodeHealthy(ctx, r, len(c.Nodes)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s not healthy after %v: %w", strings.Join(c.Addrs(), ","), timeout, err)
	}
	return nil
}

func clusterNodeHealthy(ctx context.Context, r *Redis, n int) error {
	cl := redis.NewClient(r.Options())
	defer cl.Close()
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("%s: %w", r.Addr, err)
	}
	for _, want := range []string{"cluster_state:ok", fmt.Sprintf("cluster_known_nodes:%d", n), "cluster_slots_assigned:16384"} {
		if !strings.Contains(info, want+"\r\n") {
			return fmt.Errorf("%s: no %s", r.Addr, want)
		}
	}
	repl, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("%s: %w", r.Addr, err)
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return fmt.Errorf("%s: replica's link to its master is down", r.Addr)
	}
	return nil
}

// clusterInfo returns one field of CLUSTER INFO ("" on error).
func clusterInfo(ctx context.Context, c *redis.Client, field string) string {
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// poll calls f every 100 ms until it returns nil or a hopeless error, or
// ctx ends; then it returns f's last error.
func poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil || errors.As(err, new(hopeless)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func splitAddr(a string) (host, port string) {
	i := strings.LastIndexByte(a, ':')
	return a[:i], a[i+1:]
}
