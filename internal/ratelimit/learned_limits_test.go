package ratelimit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// learningConfig is one key limited to limit per minute, learning with a.
func learningConfig(k ratelimit.Key, limit int64, a ratelimit.Adaptive) *ratelimit.Config {
	return &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		k: {Windows: []ratelimit.Window{{Limit: limit, Size: time.Minute}}, Adaptive: a},
	}}
}

// admitN admits n fresh members of k one by one and returns their holds.
func admitN(t *testing.T, l *ratelimit.Limiter, k ratelimit.Key, n int) []ratelimit.Hold {
	t.Helper()
	holds := make([]ratelimit.Hold, 0, n)
	for i := 0; i < n; i++ {
		d, err := l.Allow(context.Background(), k, fmt.Sprintf("%s-fill-%d", k.BizType, i))
		if err != nil || !d.Allowed {
			t.Fatalf("fill %d: %+v, %v", i, d, err)
		}
		holds = append(holds, d.Hold)
	}
	return holds
}

func releaseAll(t *testing.T, l *ratelimit.Limiter, holds []ratelimit.Hold) {
	t.Helper()
	for _, h := range holds {
		if err := l.Release(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
}

func mustLearned(t *testing.T, l *ratelimit.Limiter, k ratelimit.Key) []ratelimit.LearnedLimit {
	t.Helper()
	got, err := l.Learned(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// learned70 returns a Limiter on a redisstore.Store on c, and a fresh key of
// limit 100 per minute that learned 70: 100 admitted, a throttle, then
// every admission released.
func learned70(t *testing.T, c redis.UniversalClient) (*ratelimit.Limiter, ratelimit.Key) {
	t.Helper()
	s, _ := redisstore.New(c, redisstore.Options{Prefix: "test:learn:"})
	l, err := ratelimit.New(s, ratelimit.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := newKey()
	l.SetConfig(learningConfig(k, 100, ratelimit.Adaptive{}))
	holds := admitN(t, l, k, 100)
	if err := l.Throttled(context.Background(), holds[99], 0); err != nil {
		t.Fatal(err)
	}
	releaseAll(t, l, holds)
	if got := mustLearned(t, l, k); len(got) != 1 || got[0].Limit != 70 {
		t.Fatalf("learned %+v, want 70", got)
	}
	return l, k
}

// limiterHammer sends callers×perCaller distinct checks of k at once through
// l, calling during(d) on each decision, and returns the admitted holds.
func limiterHammer(t *testing.T, l *ratelimit.Limiter, k ratelimit.Key, round string, callers, perCaller int, during func(d ratelimit.Decision)) []ratelimit.Hold {
	t.Helper()
	var mu sync.Mutex
	var holds []ratelimit.Hold
	var failed atomic.Int64
	var start, done sync.WaitGroup
	start.Add(1)
	for c := 0; c < callers; c++ {
		done.Add(1)
		go func(c int) {
			defer done.Done()
			start.Wait()
			for i := 0; i < perCaller; i++ {
				d, err := l.Allow(context.Background(), k, fmt.Sprintf("%s-c%d-r%d", round, c, i))
				if err != nil {
					failed.Add(1)
					continue
				}
				during(d)
				if d.Allowed {
					mu.Lock()
					holds = append(holds, d.Hold)
					mu.Unlock()
				}
			}
		}(c)
	}
	start.Done()
	done.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d checks failed", failed.Load())
	}
	return holds
}

// TestExactAgainstLearnedLimitUnderConcurrency: 64 concurrent callers on
// one key whose learned limit (0.7 × 100 admitted) is below its configured
// 100: exactly 70 are admitted, every refusal names the learned limit; and
// with the channel throttling all along, no admission ever sees more in
// the window than the effective limit the same atomic call applied, and
// the total stays within the learned 70.
func TestExactAgainstLearnedLimitUnderConcurrency(t *testing.T) {
	for name, mk := range map[string]func(t *testing.T) redis.UniversalClient{
		"redis":   func(t *testing.T) redis.UniversalClient { return testutil.MustRedis(t) },
		"cluster": func(t *testing.T) redis.UniversalClient { return testutil.MustCluster(t) },
	} {
		t.Run(name, func(t *testing.T) {
			l, k := learned70(t, mk(t))
			var bad atomic.Value
			admitted := limiterHammer(t, l, k, "exact", 64, 13, func(d ratelimit.Decision) {
				if !d.Allowed && !d.Unknown && (!d.Learned || d.Limit != 70 || d.Configured != 100) {
					bad.Store(d)
				}
			})
			if len(admitted) != 70 {
				t.Fatalf("admitted %d, want exactly the learned 70", len(admitted))
			}
			if d := bad.Load(); d != nil {
				t.Fatalf("a refusal that does not name the learned limit 70 of 100: %+v", d)
			}
			releaseAll(t, l, admitted)

			// The channel throttles while the callers run.
			stop := make(chan struct{})
			var throttles sync.WaitGroup
			throttles.Add(1)
			go func() {
				defer throttles.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
						if err := l.Throttled(context.Background(), ratelimit.HoldOf(k, "any"), 0); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
			admitted = limiterHammer(t, l, k, "storm", 64, 13, func(d ratelimit.Decision) {
				if d.Allowed && d.Count > d.Limit {
					bad.Store(d)
				}
			})
			close(stop)
			throttles.Wait()
			if d := bad.Load(); d != nil {
				t.Fatalf("an admission over its effective limit: %+v", d)
			}
			if len(admitted) > 70 {
				t.Fatalf("admitted %d while throttled, want at most the learned 70", len(admitted))
			}
			if got := mustLearned(t, l, k); len(got) != 1 || got[0].Limit < 1 {
				t.Fatalf("learned %+v after the storm, want at least the floor 1", got)
			}
			t.Logf("%d admitted while the channel throttled; learned limit now %d", len(admitted), mustLearned(t, l, k)[0].Limit)
		})
	}
}

// storeLimiter is a Limiter on store, with no near cache.
func storeLimiter(t *testing.T, store ratelimit.Store) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(store, ratelimit.Options{Timeout: 5 * time.Second, DisableNearCache: true})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// learnerStores are the Limiter's stores that learn, on the wall clock.
func learnerStores() map[string]func(t *testing.T) ratelimit.Store {
	return map[string]func(t *testing.T) ratelimit.Store{
		"redis": func(t *testing.T) ratelimit.Store {
			s, _ := redisstore.New(testutil.MustRedis(t), redisstore.Options{Prefix: "test:learn:"})
			return s
		},
		"embedded": func(t *testing.T) ratelimit.Store {
			_, c := testutil.MustMiniredis(t)
			s, _ := redisstore.New(c, redisstore.Options{})
			return s
		},
		"local": func(t *testing.T) ratelimit.Store { return ratelimit.NewLocalStore(nil) },
		"durable": func(t *testing.T) ratelimit.Store {
			s, err := ratelimit.OpenDurableStore(filepath.Join(t.TempDir(), "limiter.journal"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

// TestThrottleStormKeepsTheFloor: hundreds of throttles in a row lower a
// learned limit once, to 0.7 × what the window admitted (they do not
// compound), and on an empty window to the floor, never below; with the
// channel's retry-after the window admits nothing until then and then
// admits exactly the floor.
func TestThrottleStormKeepsTheFloor(t *testing.T) {
	for name, mk := range learnerStores() {
		t.Run(name, func(t *testing.T) {
			l := storeLimiter(t, mk(t))
			k := newKey()
			l.SetConfig(learningConfig(k, 200, ratelimit.Adaptive{Floor: 5}))
			holds := admitN(t, l, k, 200)
			for i := 0; i < 300; i++ {
				if err := l.Throttled(context.Background(), holds[i%200], 0); err != nil {
					t.Fatal(err)
				}
				if got := mustLearned(t, l, k); len(got) != 1 || got[0].Limit != 140 {
					t.Fatalf("after throttle %d: %+v, want 140 (0.7 × 200, once)", i+1, got)
				}
			}
			releaseAll(t, l, holds)
			for i := 0; i < 300; i++ {
				ra := time.Duration(0)
				if i == 299 {
					ra = 300 * time.Millisecond
				}
				if err := l.Throttled(context.Background(), ratelimit.HoldOf(k, "x"), ra); err != nil {
					t.Fatal(err)
				}
				if got := mustLearned(t, l, k); len(got) != 1 || got[0].Learned != 5 {
					t.Fatalf("after throttle %d on an empty window: %+v, want the floor 5", i+1, got)
				}
			}
			d := mustAllow(t, l, k, "early")
			if d.Allowed || !d.Learned || d.Limit != 0 || d.RetryAfter <= 0 || d.RetryAfter > 300*time.Millisecond {
				t.Fatalf("during the channel's retry-after: %+v, want refused by a learned 0 for at most 300ms", d)
			}
			time.Sleep(d.RetryAfter + 5*time.Millisecond)
			admitted := 0
			for i := 0; i < 20; i++ {
				if mustAllow(t, l, k, fmt.Sprintf("after-%d", i)).Allowed {
					admitted++
				}
			}
			if admitted != 5 {
				t.Fatalf("after the retry-after admitted %d, want the floor 5", admitted)
			}
		})
	}
}

// TestLearnedLimitAcrossLimitsChange: a learned 70 of 100 stays in force
// across limits documents, as min(configured, learned), exactly under 64
// concurrent callers: lowered to 50, exactly 50 are admitted (the
// configured limit binds); raised to 200, exactly 20 more (the learned 70
// binds, and says so, to Peek too); ResetLearned gives the configured
// limit back.
func TestLearnedLimitAcrossLimitsChange(t *testing.T) {
	l, k := learned70(t, testutil.MustRedis(t))
	l.SetConfig(learningConfig(k, 50, ratelimit.Adaptive{}))
	var last atomic.Value
	keepRefusal := func(d ratelimit.Decision) {
		if !d.Allowed {
			last.Store(d)
		}
	}
	if got := len(limiterHammer(t, l, k, "lowered", 64, 4, keepRefusal)); got != 50 {
		t.Fatalf("limit lowered to 50 under a learned 70: admitted %d, want 50", got)
	}
	if d := last.Load().(ratelimit.Decision); d.Learned || d.Limit != 50 {
		t.Fatalf("refusal under the lowered limit: %+v, want the configured 50, not learned", d)
	}
	l.SetConfig(learningConfig(k, 200, ratelimit.Adaptive{}))
	if got := len(limiterHammer(t, l, k, "raised", 64, 4, keepRefusal)); got != 20 {
		t.Fatalf("limit raised to 200 under a learned 70 with 50 in the window: admitted %d, want 20", got)
	}
	if d := last.Load().(ratelimit.Decision); !d.Learned || d.Limit != 70 || d.Configured != 200 {
		t.Fatalf("refusal under the raised limit: %+v, want the learned 70 of 200", d)
	}
	if d, err := l.Peek(context.Background(), ratelimit.Request{Key: k}); err != nil || d.Allowed || !d.Learned || d.Limit != 70 {
		t.Fatalf("Peek under the learned 70 with 70 in the window: %+v, %v; want refused by the learned 70", d, err)
	}
	if err := l.ResetLearned(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if got := mustLearned(t, l, k); len(got) != 0 {
		t.Fatalf("after ResetLearned: %+v, want none", got)
	}
	if d := mustAllow(t, l, k, "after-reset"); !d.Allowed || d.Learned || d.Limit != 200 {
		t.Fatalf("after ResetLearned: %+v, want admitted under the configured 200", d)
	}
}

// TestOutageKeepsTheLearnedLimit: an instance that saw a learned limit in
// Redis's answers keeps it when Redis fails, cut to its share, and lets it
// climb by the step per whole window from when it saw it. The throttle was
// another instance's, so this one learned only from Redis.
func TestOutageKeepsTheLearnedLimit(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	redisLike := &switchStore{LocalStore: ratelimit.NewLocalStore(clock.Now)}
	k := newKey()
	cfg := learningConfig(k, 100, ratelimit.Adaptive{})
	var ls [2]*ratelimit.Limiter
	for i := range ls {
		l, err := ratelimit.New(redisLike, ratelimit.Options{Now: clock.Now, LocalShare: 0.5, DisableNearCache: true})
		if err != nil {
			t.Fatal(err)
		}
		l.SetConfig(cfg)
		ls[i] = l
	}
	l, other := ls[0], ls[1]
	holds := admitN(t, l, k, 100)
	if err := other.Throttled(context.Background(), ratelimit.HoldOf(k, "x"), 0); err != nil {
		t.Fatal(err)
	}
	releaseAll(t, l, holds)
	if d := mustAllow(t, l, k, "seen"); !d.Allowed || !d.Learned || d.Limit != 70 || d.Source != ratelimit.SourceRedis {
		t.Fatalf("on Redis: %+v, want admitted under the learned 70", d)
	}
	redisLike.failing.Store(true)
	count := func(round string) int {
		n := 0
		for i := 0; i < 100; i++ {
			if d := mustAllow(t, l, k, fmt.Sprintf("%s-%d", round, i)); d.Allowed {
				if d.Source != ratelimit.SourceLocal {
					t.Fatalf("%s: %+v, want a degraded decision", round, d)
				}
				n++
			}
		}
		return n
	}
	// Half of 70, less the one admission this instance made on Redis.
	if got := count("outage"); got != 34 {
		t.Fatalf("in the outage admitted %d, want 34 (70 × 0.5 − 1); 49 would be the configured share", got)
	}
	clock.Advance(time.Minute)
	if got := count("next"); got != 37 {
		t.Fatalf("one window later admitted %d, want 37 ((70 + 5) × 0.5)", got)
	}
}
