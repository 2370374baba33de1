// Package testutil finds the real services tests run against. Each address
// comes from a PAYSERVER_TEST_* environment variable set by the testenv
// command (make test runs the unit tests under it) or by a TestMain that
// starts the shared set (internal/testenv). A test whose service is not
// configured is skipped, except with CI=true, where it fails: in CI a
// missing service is a failure, never a skip.
package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// CI reports whether the tests run in CI (CI=true).
func CI() bool { return os.Getenv("CI") == "true" }

// Env returns the value of name, or skips (fails under CI) when it is unset.
func Env(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		if CI() {
			tb.Fatalf("%s is not set: run the tests through `make test` (the testenv command starts the services)", name)
		}
		tb.Skipf("%s is not set; run `make test`, or go run ./internal/testenv/cmd/testenv -- go test ...", name)
	}
	return v
}

// RedisAddr returns the real standalone Redis address.
func RedisAddr(tb testing.TB) string { return Env(tb, "PAYSERVER_TEST_REDIS_ADDR") }

// RedisClusterAddrs returns the real Redis Cluster seed addresses.
func RedisClusterAddrs(tb testing.TB) []string {
	return strings.Split(Env(tb, "PAYSERVER_TEST_REDIS_CLUSTER_ADDRS"), ",")
}

// MySQLDSN returns the DSN of the real MariaDB test database.
func MySQLDSN(tb testing.TB) string { return Env(tb, "PAYSERVER_TEST_MYSQL_DSN") }

// MustRedis returns a client on the real standalone Redis, closed at the end
// of the test.
func MustRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr(tb), PoolSize: 128})
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("redis %s does not answer: %v", c.Options().Addr, err)
	}
	return c
}

// MustCluster returns a client on the real Redis Cluster.
func MustCluster(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: RedisClusterAddrs(tb), PoolSize: 128})
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return s.Ping(ctx).Err() }); err != nil {
		tb.Fatalf("redis cluster does not answer: %v", err)
	}
	return c
}

// MustMiniredis returns a client on an embedded Redis-protocol server.
func MustMiniredis(tb testing.TB) (*miniredis.Miniredis, *redis.Client) {
	tb.Helper()
	m := miniredis.RunT(tb)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	tb.Cleanup(func() { _ = c.Close() })
	return m, c
}

// UniqueName returns prefix plus a random suffix of [A-Z0-9], usable as a
// bizType so that tests never share keys.
func UniqueName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.ToUpper(hex.EncodeToString(b[:]))
}
