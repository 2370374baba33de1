package ratelimit

import (
	"context"
	"testing"
	"time"
)

// The tests of this package that run every store run the Redis store
// (redisstore) too, which this package cannot import: it imports this
// one. redis_stores_test.go, an external test file of this package, sets
// the servers it runs on (SetRedisServers) before any test runs.

// RedisTestStore is a Redis store as those tests drive it.
type RedisTestStore interface {
	Store
	Learner
	// CheckBatch decides, in one script call, the longest run of checks
	// from the first that one call carries (as the coalescer groups
	// them), and returns their results (redisstore.Store.CheckBatch).
	CheckBatch(ctx context.Context, checks []BatchCheck) ([]StoreResult, error)
}

// BatchCheck is one check of RedisTestStore.CheckBatch.
type BatchCheck struct {
	Windows []KeyWindow
	Member  string
	Amount  int64
}

// RedisServer makes Redis stores on one kind of server.
type RedisServer struct {
	Name string
	// New returns a store with prefix on a server for t whose scripts
	// decide at *now, or at Redis TIME when now is nil.
	New func(t *testing.T, prefix string, now *time.Time) RedisTestStore
}

var redisServers []RedisServer

// SetRedisServers sets the servers the tests run the Redis store on.
func SetRedisServers(servers []RedisServer) { redisServers = servers }

// theRedisServers returns the servers the tests run the Redis store on;
// none set fails the test that asks, so that no test drops the Redis
// store without a word.
func theRedisServers() []RedisServer {
	if len(redisServers) == 0 {
		return []RedisServer{{Name: "redis", New: func(t *testing.T, _ string, _ *time.Time) RedisTestStore {
			t.Fatal("no Redis servers set: redis_stores_test.go sets them")
			return nil
		}}}
	}
	return redisServers
}

// redisServer returns the server named name.
func redisServer(t *testing.T, name string) RedisServer {
	t.Helper()
	for _, s := range theRedisServers() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Redis server %q set", name)
	return RedisServer{}
}

// Waiting returns how many requests wait for room for key now.
func (l *Limiter) Waiting(key Key) int { return l.waits.waiting(key) }
