package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/ratelimit/redisstore/redisstoretest"
	"payserver/internal/testutil"
)

// hammer sends callers×perCaller distinct requests for one key at once and
// returns how many the store admitted.
func hammer(t *testing.T, s ratelimit.Store, k ratelimit.Key, w ratelimit.Window, callers, perCaller int) int64 {
	t.Helper()
	var admitted, failed atomic.Int64
	var start, done sync.WaitGroup
	start.Add(1)
	for c := 0; c < callers; c++ {
		done.Add(1)
		go func(c int) {
			defer done.Done()
			start.Wait()
			for i := 0; i < perCaller; i++ {
				res, err := s.Check(context.Background(), ratelimit.KeyWindows(k, []ratelimit.Window{w}), fmt.Sprintf("c%d-r%d", c, i), 0)
				if err != nil {
					failed.Add(1)
					continue
				}
				if res.Allowed {
					admitted.Add(1)
				}
			}
		}(c)
	}
	start.Done()
	done.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d checks failed", failed.Load())
	}
	return admitted.Load()
}

// TestExactUnderConcurrency: 64 concurrent callers, demand 8x the limit,
// one key. The atomic script admits exactly the limit, never more and never
// fewer.
func TestExactUnderConcurrency(t *testing.T) {
	clients := map[string]func(t *testing.T) redis.UniversalClient{
		"redis":   func(t *testing.T) redis.UniversalClient { return testutil.MustRedis(t) },
		"cluster": func(t *testing.T) redis.UniversalClient { return testutil.MustCluster(t) },
	}
	for name, mk := range clients {
		t.Run(name, func(t *testing.T) {
			s, _ := redisstore.New(mk(t), redisstore.Options{Prefix: "test:rl:"})
			for round := 0; round < 3; round++ {
				w := ratelimit.Window{Limit: 100, Size: time.Minute}
				got := hammer(t, s, newKey(), w, 64, 13)
				if got != w.Limit {
					t.Fatalf("round %d: admitted %d, want exactly %d", round, got, w.Limit)
				}
			}
		})
	}
}

// TestNaiveThreeCommandsOverAdmit shows that the same load over-admits with
// the three-round-trip sequence of the original design notes, so the
// exactness test above can fail.
func TestNaiveThreeCommandsOverAdmit(t *testing.T) {
	naive := &redisstoretest.NaiveStore{Client: testutil.MustRedis(t), Prefix: "test:naive:"}
	w := ratelimit.Window{Limit: 100, Size: time.Minute}
	var worst int64
	for round := 0; round < 5 && worst <= w.Limit; round++ {
		worst = max(worst, hammer(t, naive, newKey(), w, 64, 13))
	}
	if worst <= w.Limit {
		t.Fatalf("naive store admitted at most %d of limit %d in 5 rounds; expected over-admission", worst, w.Limit)
	}
	t.Logf("naive three-command store admitted %d with limit %d", worst, w.Limit)
}
