package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// The Redis store runs in this package's tests of every store on a Redis
// server, a Cluster and the embedded server (export_test.go).
func init() {
	ratelimit.SetRedisServers([]ratelimit.RedisServer{
		{Name: "redis", New: func(t *testing.T, prefix string, now *time.Time) ratelimit.RedisTestStore {
			return newRedisTestStore(t, testutil.MustRedis(t), prefix, now)
		}},
		{Name: "cluster", New: func(t *testing.T, prefix string, now *time.Time) ratelimit.RedisTestStore {
			return newRedisTestStore(t, testutil.MustCluster(t), prefix, now)
		}},
		{Name: "embedded", New: func(t *testing.T, prefix string, now *time.Time) ratelimit.RedisTestStore {
			_, c := testutil.MustMiniredis(t)
			return newRedisTestStore(t, c, prefix, now)
		}},
	})
}

// redisTestStore is a redisstore.Store as ratelimit.RedisTestStore.
type redisTestStore struct{ *redisstore.Store }

func newRedisTestStore(t *testing.T, c redis.UniversalClient, prefix string, now *time.Time) ratelimit.RedisTestStore {
	t.Helper()
	opts := redisstore.Options{Prefix: prefix}
	if now != nil {
		opts.Now = func() time.Time { return *now }
	}
	s, err := redisstore.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return redisTestStore{s}
}

func (s redisTestStore) CheckBatch(ctx context.Context, checks []ratelimit.BatchCheck) ([]ratelimit.StoreResult, error) {
	bc := make([]redisstore.BatchCheck, len(checks))
	for i, c := range checks {
		bc[i] = redisstore.BatchCheck{Windows: c.Windows, Member: c.Member, Amount: c.Amount}
	}
	return s.Store.CheckBatch(ctx, bc)
}
