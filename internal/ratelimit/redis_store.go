package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultKeyPrefix starts every Redis key the limiter writes.
const DefaultKeyPrefix = "payserver:rl:"

// StoreResult is what one atomic check against the shared store decided.
type StoreResult struct {
	Allowed bool
	// Count is the occupancy of the binding window after the check.
	Count int64
	// Window is the index in Rule.Windows of the binding window.
	Window int
	// RetryAfter is how long until the binding window has room; zero when
	// allowed.
	RetryAfter time.Duration
	// Duplicate is true when the member was already in the window.
	Duplicate bool
}

// Store is the shared state behind the limiter: one atomic check per call.
// RedisStore is the implementation; the interface lets tests and benchmarks
// put other stores (such as the naive three-command version) behind the
// same Limiter.
type Store interface {
	// Check admits or refuses member against every window of the key at once.
	Check(ctx context.Context, key Key, windows []Window, member string) (StoreResult, error)
	// Release removes member from every window of the key.
	Release(ctx context.Context, key Key, windows []Window, member string) error
	// Usage returns the occupancy of each window of the key.
	Usage(ctx context.Context, key Key, windows []Window) ([]int64, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// RedisStore keeps one sorted set per key and window in Redis (standalone or
// Cluster) and checks them with one Lua call.
type RedisStore struct {
	client redis.UniversalClient
	prefix string
}

// NewRedisStore returns a store on client. An empty prefix means
// DefaultKeyPrefix.
func NewRedisStore(client redis.UniversalClient, prefix string) (*RedisStore, error) {
	if client == nil {
		return nil, errors.New("ratelimit: nil redis client")
	}
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	return &RedisStore{client: client, prefix: prefix}, nil
}

// RedisKey returns the sorted-set key of one window of k. The pair sits in a
// hash tag, so every window of one key lives in one Cluster slot, and its
// halves are drawn from [A-Z0-9_], so no other pair can produce the same key.
func (s *RedisStore) RedisKey(k Key, w Window) string {
	return s.prefix + "{" + k.BizType + ":" + k.Channel + "}:" + strconv.FormatInt(w.Size.Milliseconds(), 10)
}

func (s *RedisStore) keys(k Key, windows []Window) []string {
	keys := make([]string, len(windows))
	for i, w := range windows {
		keys[i] = s.RedisKey(k, w)
	}
	return keys
}

// Check implements Store with one EVALSHA (EVAL after NOSCRIPT, transparently).
func (s *RedisStore) Check(ctx context.Context, k Key, windows []Window, member string) (StoreResult, error) {
	if len(windows) == 0 {
		return StoreResult{Allowed: true}, nil
	}
	args := make([]any, 2, 2+2*len(windows))
	args[0] = member
	args[1] = windows[len(windows)-1].Size.Milliseconds()
	for _, w := range windows {
		args = append(args, w.Limit, w.Size.Microseconds())
	}
	res, err := checkScript.Run(ctx, s.client, s.keys(k, windows), args...).Int64Slice()
	if err != nil {
		return StoreResult{}, err
	}
	if len(res) != 5 || res[2] < 1 || int(res[2]) > len(windows) {
		return StoreResult{}, fmt.Errorf("ratelimit: unexpected script reply %v", res)
	}
	return StoreResult{
		Allowed:    res[0] == 1,
		Count:      res[1],
		Window:     int(res[2]) - 1,
		RetryAfter: time.Duration(res[3]) * time.Microsecond,
		Duplicate:  res[4] == 1,
	}, nil
}

// Release implements Store.
func (s *RedisStore) Release(ctx context.Context, k Key, windows []Window, member string) error {
	if len(windows) == 0 {
		return nil
	}
	return releaseScript.Run(ctx, s.client, s.keys(k, windows), member).Err()
}

// Usage implements Store.
func (s *RedisStore) Usage(ctx context.Context, k Key, windows []Window) ([]int64, error) {
	if len(windows) == 0 {
		return nil, nil
	}
	args := make([]any, len(windows))
	for i, w := range windows {
		args[i] = w.Size.Microseconds()
	}
	return usageScript.Run(ctx, s.client, s.keys(k, windows), args...).Int64Slice()
}

// Ping implements Store.
func (s *RedisStore) Ping(ctx context.Context) error {
	return s.client.Ping(ctx).Err()
}
