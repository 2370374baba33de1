package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisKillStart(t *testing.T) {
	r := StartRedis(t, RedisOptions{Password: "pw"})
	c := redis.NewClient(r.Options())
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}
	r.Start()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Start: %v", err)
	}
}

// Sentinel and the fault injection are exercised by the failover tests in
// integration/.
func TestCluster(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, ClusterOptions{Replicas: 1})
	t.Logf("cluster of %d up in %v", len(c.Nodes), time.Since(start))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := cc.Set(context.Background(), k, 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMariaDB(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) MariaDBOptions
	}{
		{"plain", func(*testing.T) MariaDBOptions { return MariaDBOptions{} }},
		{"durable", func(*testing.T) MariaDBOptions { return MariaDBOptions{Durable: true} }},
		{"tls", func(t *testing.T) MariaDBOptions { return MariaDBOptions{TLS: NewCerts(t)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			opts := tc.opts(t)
			m := StartMariaDB(t, opts)
			t.Logf("up in %v", time.Since(start))
			if opts.TLS != nil {
				if err := pingDSN(m.DSN, nil); err == nil || !strings.Contains(err.Error(), "Access denied") {
					t.Errorf("plain connection of the payserver user: got %v, want Access denied", err)
				}
			}
			var flush, logBin, syncBinlog int
			if err := queryRow(m.RootDSN, "SELECT @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog", &flush, &logBin, &syncBinlog); err != nil {
				t.Fatal(err)
			}
			if want := [3]int{2, 0, 0}; opts.Durable && [3]int{flush, logBin, syncBinlog} != [3]int{1, 1, 1} || !opts.Durable && [3]int{flush, logBin, syncBinlog} != want {
				t.Errorf("innodb_flush_log_at_trx_commit, log_bin, sync_binlog = %d, %d, %d (durable %v)", flush, logBin, syncBinlog, opts.Durable)
			}
			m.Kill()
			if m.Ping() == nil {
				t.Fatal("answers after Kill")
			}
			start = time.Now()
			m.Start()
			t.Logf("up again in %v", time.Since(start))
		})
	}
}

func TestNacos(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			start := time.Now()
			c := StartNacos(t, NacosOptions{Nodes: n})
			t.Logf("%d node(s) up in %v", n, time.Since(start))
			last := c.Nodes[n-1]
			last.Kill()
			if err := NacosPublish(c.Addr(), "PAY_GROUP", "while-down", "x"); n == 3 && err != nil {
				t.Fatalf("publish with one of three nodes down: %v", err)
			}
			start = time.Now()
			last.Start()
			t.Logf("node %d up again in %v", last.ID, time.Since(start))
		})
	}
}

func queryRow(dsn, q string, dest ...any) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRow(q).Scan(dest...)
}
