// Package redisstoretest holds limiter stores on Redis for tests and
// benchmarks that show what the Redis store's atomic script avoids.
package redisstoretest

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
)

// NaiveStore is the sliding window of the original design notes: three
// separate round trips (ZREMRANGEBYSCORE, ZCARD, ZADD) with app-server
// clocks. Between the count and the add, concurrent callers all see room,
// so it over-admits. It exists to prove that the exactness test has teeth
// and to benchmark against; never use it to limit anything.
type NaiveStore struct {
	Client redis.UniversalClient
	Prefix string
}

// Check implements ratelimit.Store, naively. Only the first window is used.
func (s *NaiveStore) Check(ctx context.Context, windows []ratelimit.KeyWindow, member string, _ int64) (ratelimit.StoreResult, error) {
	w := windows[0]
	key := s.Prefix + w.Key.BizType + w.Key.Channel + ":" + strconv.FormatInt(w.Size.Milliseconds(), 10)
	now := time.Now().UnixMicro()
	if err := s.Client.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now-w.Size.Microseconds(), 10)).Err(); err != nil {
		return ratelimit.StoreResult{}, err
	}
	count, err := s.Client.ZCard(ctx, key).Result()
	if err != nil {
		return ratelimit.StoreResult{}, err
	}
	if count >= w.Limit {
		return ratelimit.StoreResult{Count: count, RetryAfter: w.Size}, nil
	}
	if err := s.Client.ZAdd(ctx, key, redis.Z{Score: float64(now), Member: member}).Err(); err != nil {
		return ratelimit.StoreResult{}, err
	}
	s.Client.PExpire(ctx, key, w.Size)
	return ratelimit.StoreResult{Allowed: true, Count: count + 1, At: time.UnixMicro(now)}, nil
}

// Release implements ratelimit.Store. It removes nothing, and says so.
func (s *NaiveStore) Release(ctx context.Context, windows []ratelimit.KeyWindow, member string) (bool, error) {
	return false, nil
}

// ReleaseIfAmount implements ratelimit.Store. It removes nothing, and says
// so.
func (s *NaiveStore) ReleaseIfAmount(context.Context, []ratelimit.KeyWindow, string, int64) (bool, error) {
	return false, nil
}

// Usage implements ratelimit.Store.
func (s *NaiveStore) Usage(ctx context.Context, windows []ratelimit.KeyWindow) ([]int64, error) {
	return make([]int64, len(windows)), nil
}

// Ping implements ratelimit.Store.
func (s *NaiveStore) Ping(ctx context.Context) error { return s.Client.Ping(ctx).Err() }
