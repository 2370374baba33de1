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

// storeCase is one Store implementation under the shared suite.
type storeCase struct {
	name  string
	store func(t *testing.T) ratelimit.Store
	// flush removes every script from the server, if it has a server.
	flush func(t *testing.T)
}

func storeCases() []storeCase {
	var realClient, miniClient *redis.Client
	return []storeCase{
		{
			name: "redis",
			store: func(t *testing.T) ratelimit.Store {
				realClient = testutil.MustRedis(t)
				s, err := redisstore.New(realClient, redisstore.Options{Prefix: "test:rl:"})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			flush: func(t *testing.T) { realClient.ScriptFlush(context.Background()) },
		},
		{
			name: "embedded",
			store: func(t *testing.T) ratelimit.Store {
				_, miniClient = testutil.MustMiniredis(t)
				s, _ := redisstore.New(miniClient, redisstore.Options{})
				return s
			},
			flush: func(t *testing.T) { miniClient.ScriptFlush(context.Background()) },
		},
		{
			name: "redis-coalesce",
			store: func(t *testing.T) ratelimit.Store {
				realClient = testutil.MustRedis(t)
				return mustStoreWith(t, realClient, redisstore.Options{Coalesce: true})
			},
			flush: func(t *testing.T) { realClient.ScriptFlush(context.Background()) },
		},
		{
			name: "embedded-coalesce",
			store: func(t *testing.T) ratelimit.Store {
				_, miniClient = testutil.MustMiniredis(t)
				return mustStoreWith(t, miniClient, redisstore.Options{Coalesce: true})
			},
			flush: func(t *testing.T) { miniClient.ScriptFlush(context.Background()) },
		},
		{
			name:  "local",
			store: func(t *testing.T) ratelimit.Store { return ratelimit.NewLocalStore(nil) },
		},
	}
}

func newKey() ratelimit.Key {
	return ratelimit.Key{BizType: testutil.UniqueName("T"), Channel: "ALIPAY"}
}

func mustCheck(t *testing.T, s ratelimit.Store, k ratelimit.Key, ws []ratelimit.Window, member string) ratelimit.StoreResult {
	t.Helper()
	res, err := s.Check(context.Background(), ratelimit.KeyWindows(k, ws), member, 0)
	if err != nil {
		t.Fatalf("Check(%s, %s): %v", k, member, err)
	}
	return res
}

func TestStoreSuite(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			t.Run("admits exactly the limit", func(t *testing.T) {
				s, k := sc.store(t), newKey()
				ws := []ratelimit.Window{{Limit: 3, Size: 10 * time.Second}}
				for i, m := range []string{"a", "b", "c"} {
					res := mustCheck(t, s, k, ws, m)
					if !res.Allowed || res.Count != int64(i+1) {
						t.Fatalf("request %d: got %+v, want allowed with count %d", i+1, res, i+1)
					}
				}
				res := mustCheck(t, s, k, ws, "d")
				if res.Allowed {
					t.Fatalf("4th request admitted over limit 3: %+v", res)
				}
				if res.RetryAfter <= 0 || res.RetryAfter > 10*time.Second {
					t.Fatalf("retry after = %v, want in (0, 10s]", res.RetryAfter)
				}
			})
			t.Run("duplicate member is not counted twice", func(t *testing.T) {
				s, k := sc.store(t), newKey()
				ws := []ratelimit.Window{{Limit: 2, Size: 10 * time.Second}}
				mustCheck(t, s, k, ws, "a")
				res := mustCheck(t, s, k, ws, "a")
				if !res.Allowed || !res.Duplicate || res.Count != 1 {
					t.Fatalf("retry of a: got %+v, want allowed duplicate with count 1", res)
				}
				mustCheck(t, s, k, ws, "b")
				res = mustCheck(t, s, k, ws, "a") // full now, but a is in it
				if !res.Allowed || !res.Duplicate {
					t.Fatalf("retry of a in a full window: got %+v, want allowed duplicate", res)
				}
				if res := mustCheck(t, s, k, ws, "c"); res.Allowed {
					t.Fatalf("c admitted over limit: %+v", res)
				}
			})
			t.Run("window slides", func(t *testing.T) {
				s, k := sc.store(t), newKey()
				ws := []ratelimit.Window{{Limit: 1, Size: 300 * time.Millisecond}}
				mustCheck(t, s, k, ws, "a")
				res := mustCheck(t, s, k, ws, "b")
				if res.Allowed {
					t.Fatalf("b admitted in a full window")
				}
				time.Sleep(res.RetryAfter + 20*time.Millisecond)
				if res := mustCheck(t, s, k, ws, "c"); !res.Allowed {
					t.Fatalf("c refused after the retry-after passed: %+v", res)
				}
			})
			t.Run("all windows enforced together", func(t *testing.T) {
				s, k := sc.store(t), newKey()
				ws := []ratelimit.Window{{Limit: 2, Size: 200 * time.Millisecond}, {Limit: 3, Size: 10 * time.Second}}
				mustCheck(t, s, k, ws, "a")
				mustCheck(t, s, k, ws, "b")
				res := mustCheck(t, s, k, ws, "c")
				if res.Allowed || res.Window != 0 {
					t.Fatalf("c: got %+v, want refused by the short window", res)
				}
				time.Sleep(250 * time.Millisecond)
				if res := mustCheck(t, s, k, ws, "d"); !res.Allowed {
					t.Fatalf("d refused after the short window slid: %+v", res)
				}
				res = mustCheck(t, s, k, ws, "e")
				if res.Allowed || res.Window != 1 {
					t.Fatalf("e: got %+v, want refused by the long window (3 in 10s)", res)
				}
				if res.RetryAfter < 9*time.Second {
					t.Fatalf("e retry after %v, want ~10s (the long window's oldest)", res.RetryAfter)
				}
			})
			t.Run("refused requests are not recorded", func(t *testing.T) {
				s, k := sc.store(t), newKey()
				ws := []ratelimit.Window{{Limit: 1, Size: 10 * time.Second}}
				mustCheck(t, s, k, ws, "a")
				for i := 0; i < 5; i++ {
					mustCheck(t, s, k, ws, "x")
				}
				usage, err := s.Usage(context.Background(), ratelimit.KeyWindows(k, ws))
				if err != nil {
					t.Fatal(err)
				}
				if usage[0] != 1 {
					t.Fatalf("usage = %v, want [1]", usage)
				}
			})
			t.Run("release frees the slot in every window", func(t *testing.T) {
				s, k := sc.store(t), newKey()
				ws := []ratelimit.Window{{Limit: 1, Size: 10 * time.Second}, {Limit: 5, Size: time.Minute}}
				mustCheck(t, s, k, ws, "a")
				if found, err := s.Release(context.Background(), ratelimit.KeyWindows(k, ws), "a"); err != nil || !found {
					t.Fatalf("release a: found %v, %v; want found", found, err)
				}
				if found, err := s.Release(context.Background(), ratelimit.KeyWindows(k, ws), "a"); err != nil || found {
					t.Fatalf("release a again: found %v, %v; want not found", found, err)
				}
				usage, _ := s.Usage(context.Background(), ratelimit.KeyWindows(k, ws))
				if usage[0] != 0 || usage[1] != 0 {
					t.Fatalf("usage after release = %v, want [0 0]", usage)
				}
				if res := mustCheck(t, s, k, ws, "b"); !res.Allowed {
					t.Fatalf("b refused after release: %+v", res)
				}
			})
			if sc.flush != nil {
				t.Run("script flushed (NOSCRIPT) is reloaded transparently", func(t *testing.T) {
					s, k := sc.store(t), newKey()
					ws := []ratelimit.Window{{Limit: 5, Size: time.Second}}
					mustCheck(t, s, k, ws, "a")
					sc.flush(t)
					if res := mustCheck(t, s, k, ws, "b"); !res.Allowed || res.Count != 2 {
						t.Fatalf("after SCRIPT FLUSH: %+v, want allowed count 2", res)
					}
				})
			}
		})
	}
}

func TestRedisKeysHaveTTL(t *testing.T) {
	client := testutil.MustRedis(t)
	s, _ := redisstore.New(client, redisstore.Options{Prefix: "test:rl:"})
	k := newKey()
	ws := []ratelimit.Window{{Limit: 5, Size: time.Second}, {Limit: 50, Size: time.Minute}}
	mustCheck(t, s, k, ws, "a")
	for _, w := range ws {
		key := s.RedisKey(ratelimit.KeyWindow{Key: k, Window: w})
		ttl, err := client.PTTL(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		// The window plus the 2 s margin that keeps a key alive while its
		// newest member is in the window (the embedded server counts TTLs
		// down in whole seconds).
		if ttl <= w.Size || ttl > w.Size+2*time.Second {
			t.Fatalf("TTL of %s = %v, want in (%v, %v] (the window plus 2 s)", key, ttl, w.Size, w.Size+2*time.Second)
		}
	}
}
