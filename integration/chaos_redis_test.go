package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/testenv"
)

// The campaign's Redis topology: standalone, Sentinel or Cluster, drawn
// per campaign (Sentinel and Cluster one campaign in six each) from a
// generator of its own (the seed's stream 3), so that neither CHAOS_REDIS
// nor whether r-nacos runs changes the other draws of a seed.

// chaosTopology draws the campaign's Redis topology from the seed, or
// reads CHAOS_REDIS.
func chaosTopology(seed uint64) string {
	draw := rand.New(rand.NewPCG(seed, 3)).IntN(6)
	switch v := os.Getenv("CHAOS_REDIS"); v {
	case "standalone", "sentinel", "cluster":
		return v
	}
	switch draw {
	case 0:
		return "sentinel"
	case 1:
		return "cluster"
	}
	return "standalone"
}

// startRedis starts the campaign's Redis in its topology, and the client
// that reads its windows at the end.
func (c *campaign) startRedis() {
	c.topology = chaosTopology(c.run.seed)
	switch c.topology {
	case "sentinel":
		c.sentinel = testenv.StartSentinel(c.t, testenv.SentinelOptions{})
		c.rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: testenv.SentinelMaster, SentinelAddrs: c.sentinel.Addrs()})
	case "cluster":
		c.cluster = testenv.StartCluster(c.t, testenv.ClusterOptions{Replicas: 1})
		c.rcl = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.cluster.Addrs()})
		c.t.Cleanup(func() { _ = c.rcl.Close() })
		return
	default:
		c.redisSrv = testenv.StartRedis(c.t, testenv.RedisOptions{})
		c.rdb = redis.NewClient(&redis.Options{Addr: c.redisSrv.Addr})
	}
	c.t.Cleanup(func() { _ = c.rdb.Close() })
}

// redisEnv points instance in at the campaign's Redis: standalone through
// a proxy of its own (which the nemesis slows and cuts), Sentinel and
// Cluster directly (their clients learn the data nodes' addresses from the
// servers, so a proxy would be bypassed).
func (c *campaign) redisEnv(in *chaosInstance, env map[string]string) {
	switch c.topology {
	case "sentinel":
		env["PAYSERVER_REDIS_ADDR"], env["PAYSERVER_REDIS_MODE"] = "", "sentinel"
		env["PAYSERVER_REDIS_SENTINELS"] = strings.Join(c.sentinel.Addrs(), ",")
		env["PAYSERVER_REDIS_MASTER"] = testenv.SentinelMaster
	case "cluster":
		env["PAYSERVER_REDIS_ADDR"], env["PAYSERVER_REDIS_MODE"] = strings.Join(c.cluster.Addrs(), ","), "cluster"
	default:
		in.redis = startProxy(c.t, c.redisSrv.Addr)
		env["PAYSERVER_REDIS_ADDR"] = in.redis.addr
	}
}

// redisOf is a client of the node holding channel ch's windows.
func (c *campaign) redisOf(ctx context.Context, ch string) (*redis.Client, error) {
	if c.topology != "cluster" {
		return c.rdb, nil
	}
	// The client's slot map is only reloaded when asked (it sends little
	// else): after a failover it may still name the old master, restarted
	// empty as a replica, whose keys are not the channel's. Ask for a
	// reload until the node it names answers ROLE as a master.
	var last error
	for range 50 {
		cl, err := c.rcl.MasterForKey(ctx, "{"+ch+"}")
		if err == nil {
			role, rerr := cl.Do(ctx, "ROLE").Slice()
			if rerr == nil && len(role) > 0 && role[0] == "master" {
				return cl, nil
			}
			err = fmt.Errorf("node %s answers ROLE %v (%v), not as a master", cl.Options().Addr, role, rerr)
		}
		last = err
		c.rcl.ReloadState(ctx)
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("chaos: the cluster node of {%s}: %w", ch, last)
}

// redisLost loses windows: standalone, Redis killed and started again
// empty; Sentinel, the master killed (its replica is promoted, without
// what the master had not sent it) and started again, empty, as a replica,
// or as the master again when it is back before the sentinels agree it
// was down; Cluster, the master of a channel's slots likewise. The fault
// lasts until the topology is healthy again, and may have lost every
// write (-1: the documented fallback bound, each window as it stood: at
// most the highest limit it had while what it held was admitted).
func (c *campaign) redisLost(r *rand.Rand, hold time.Duration) {
	var victim *testenv.Redis
	healthy := func() {
		if victim != nil {
			victim.Start()
		}
		var err error
		switch c.topology {
		case "sentinel":
			err = c.sentinel.WaitHealthy(90 * time.Second)
		case "cluster":
			err = c.cluster.WaitHealthy(90 * time.Second)
		}
		if err != nil {
			c.t.Errorf("chaos: Redis did not recover from a lost master: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch c.topology {
	case "sentinel":
		if addr, err := c.sentinel.Master(ctx); err == nil {
			victim = c.sentinel.Node(addr)
		}
	case "cluster":
		ch := c.chA
		if r.IntN(2) == 0 {
			ch = c.chB
		}
		cl, err := c.redisOf(ctx, ch)
		if err != nil {
			c.t.Errorf("%v", err)
			return
		}
		victim = c.cluster.Node(cl.Options().Addr)
	default:
		victim = c.redisSrv
	}
	c.fault("redis", "", hold, func() {
		if victim != nil {
			victim.Kill()
		}
	}, healthy, -1)
}
