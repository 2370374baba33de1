package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name under which the sentinels monitor the master.
const SentinelMaster = "payserver-master"

// SentinelOptions configure StartSentinel. The zero value has sentinels
// without a password.
type SentinelOptions struct {
	// Password, when set, is required by the sentinels (requirepass, and
	// sentinel-pass between themselves); the data nodes have none.
	Password string
}

// Sentinel is a master, its replica and three sentinels monitoring the
// master as SentinelMaster with quorum 2 (down after 1 s, failover timeout
// 5 s). A data node started again comes back as a replica of the master
// the sentinels name then.
type Sentinel struct {
	// Data are the data nodes: Data[0] is the first master, Data[1] its replica.
	Data []*Redis
	// Sentinels are the three sentinel processes.
	Sentinels []*Redis
	// Password is what the sentinels require ("" for none).
	Password string
}

// StartSentinel starts the data nodes and the sentinels on free loopback
// ports under tb.TempDir()s and returns once every sentinel sees the
// master, its replica and the two other sentinels.
func StartSentinel(tb TB, opts SentinelOptions) *Sentinel {
	tb.Helper()
	s := &Sentinel{Password: opts.Password}
	master := StartRedis(tb, RedisOptions{})
	replica := newRedis(tb, RedisOptions{}, "sentinel data node")
	s.Data = []*Redis{master, replica}
	for _, d := range s.Data {
		d.p.more = func() []string { return s.replicaArgs(d) }
	}
	replica.Start()
	mhost, mport := splitAddr(master.Addr)
	for range 3 {
		sn := newRedis(tb, RedisOptions{Password: opts.Password}, "sentinel")
		conf := filepath.Join(sn.Dir, "sentinel.conf")
		_, port := splitAddr(sn.Addr)
		text := fmt.Sprintf("bind %s\nport %s\nprotected-mode yes\ndir %s\nlogfile \"\"\nsentinel resolve-hostnames no\n"+
			"sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %[4]s 1000\n"+
			"sentinel failover-timeout %[4]s 5000\nsentinel parallel-syncs %[4]s 1\n",
			Host, port, sn.Dir, SentinelMaster, mhost, mport)
		if opts.Password != "" {
			text += fmt.Sprintf("requirepass %q\nsentinel sentinel-pass %q\n", opts.Password, opts.Password)
		}
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatalf("testenv: %v", err)
		}
		sn.p.args = []string{sn.p.args[0], conf, "--sentinel"}
		sn.Start()
		s.Sentinels = append(s.Sentinels, sn)
	}
	if err := s.WaitHealthy(60 * time.Second); err != nil {
		tb.Fatalf("testenv: %v\n%s", err, s.Sentinels[0].p.tail(20))
	}
	return s
}

// Addrs returns the sentinels' addresses.
func (s *Sentinel) Addrs() []string { return addrsOf(s.Sentinels) }

// DataAddrs returns the data nodes' addresses.
func (s *Sentinel) DataAddrs() []string { return addrsOf(s.Data) }

// Node returns the data node or sentinel at addr, or nil.
func (s *Sentinel) Node(addr string) *Redis {
	for _, r := range append(append([]*Redis(nil), s.Data...), s.Sentinels...) {
		if r.Addr == addr {
			return r
		}
	}
	return nil
}

// Master asks the sentinels which address is the master now.
func (s *Sentinel) Master(ctx context.Context) (string, error) {
	var last error = fmt.Errorf("no sentinel answered")
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(sn.Options())
		hp, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
		_ = c.Close()
		if err == nil && len(hp) == 2 {
			return hp[0] + ":" + hp[1], nil
		}
		if err != nil {
			last = err
		}
	}
	return "", last
}

// replicaArgs makes data node d, at its start, a replica of the master the
// sentinels name, unless that is d itself or no sentinel answers.
func (s *Sentinel) replicaArgs(d *Redis) []string {
	var master string
	if len(s.Sentinels) == 0 {
		master = s.Data[0].Addr // the first start: before any sentinel
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		master, _ = s.Master(ctx)
	}
	if master == "" || master == d.Addr {
		return nil
	}
	host, port := splitAddr(master)
	return []string{"--replicaof", host, port}
}

// WaitHealthy waits until every sentinel sees the master with one replica
// and two other sentinels, and the master has its replica connected.
func (s *Sentinel) WaitHealthy(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := poll(ctx, func() error {
		master, err := s.Master(ctx)
		if err != nil {
			return err
		}
		for _, sn := range s.Sentinels {
			c := redis.NewSentinelClient(sn.Options())
			m, err := c.Master(ctx, SentinelMaster).Result()
			_ = c.Close()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", sn.Addr, err)
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" || m["flags"] != "master" {
				return fmt.Errorf("sentinel %s sees num-slaves %s, num-other-sentinels %s, flags %s", sn.Addr, m["num-slaves"], m["num-other-sentinels"], m["flags"])
			}
		}
		d := s.Node(master)
		if d == nil {
			return fmt.Errorf("the sentinels name %s, not a data node", master)
		}
		c := redis.NewClient(d.Options())
		defer c.Close()
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "connected_slaves:1") {
			return fmt.Errorf("master %s has no replica connected", master)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sentinel set not healthy after %v: %w", timeout, err)
	}
	return nil
}

func addrsOf(rs []*Redis) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Addr
	}
	return out
}
