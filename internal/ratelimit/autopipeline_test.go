package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// batchedClients are the backends the autopipelined store is checked on.
func batchedClients() map[string]func(t *testing.T) redis.UniversalClient {
	return map[string]func(t *testing.T) redis.UniversalClient{
		"redis":   func(t *testing.T) redis.UniversalClient { return testutil.MustRedis(t) },
		"cluster": func(t *testing.T) redis.UniversalClient { return testutil.MustCluster(t) },
		"embedded": func(t *testing.T) redis.UniversalClient {
			_, c := testutil.MustMiniredis(t)
			return c
		},
	}
}

func mustBatchedStore(t *testing.T, c redis.UniversalClient) *ratelimit.RedisStore {
	t.Helper()
	s, err := ratelimit.NewRedisStoreWithOptions(c, ratelimit.RedisStoreOptions{Prefix: "test:rl:", AutoPipeline: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAutoPipelineExactUnderConcurrency is TestExactUnderConcurrency with
// checks coalesced into pipelines: 64 callers, demand 8x the limit, exactly
// the limit admitted.
func TestAutoPipelineExactUnderConcurrency(t *testing.T) {
	for name, mk := range batchedClients() {
		t.Run(name, func(t *testing.T) {
			s := mustBatchedStore(t, mk(t))
			for round := 0; round < 3; round++ {
				w := ratelimit.Window{Limit: 100, Size: time.Minute}
				if got := hammer(t, s, newKey(), w, 64, 13); got != w.Limit {
					t.Fatalf("round %d: admitted %d, want exactly %d", round, got, w.Limit)
				}
			}
		})
	}
}

// TestAutoPipelineStoreSameAnswers replays one sequence of checks (two
// windows, duplicates, refusals, a release) through the plain and the
// batched store on two fresh keys and wants the same answers, retry-after
// aside (it depends on the instant).
func TestAutoPipelineStoreSameAnswers(t *testing.T) {
	for name, mk := range batchedClients() {
		t.Run(name, func(t *testing.T) {
			c := mk(t)
			plain, _ := ratelimit.NewRedisStore(c, "test:rl:")
			batched := mustBatchedStore(t, c)
			ws := []ratelimit.Window{{Limit: 3, Size: 10 * time.Second}, {Limit: 4, Size: time.Minute}}
			seq := []string{"a", "b", "a", "c", "d", "c", "-c", "e", "f", "a", "g"}
			kp, kb := newKey(), newKey()
			for i, m := range seq {
				if m[0] == '-' {
					for _, s := range []struct {
						st ratelimit.Store
						k  ratelimit.Key
					}{{plain, kp}, {batched, kb}} {
						if err := s.st.Release(context.Background(), s.k, ws, m[1:]); err != nil {
							t.Fatal(err)
						}
					}
					continue
				}
				want := mustCheck(t, plain, kp, ws, m)
				got := mustCheck(t, batched, kb, ws, m)
				want.RetryAfter, got.RetryAfter = 0, 0
				if got != want {
					t.Fatalf("step %d (%s): batched %+v, plain %+v", i, m, got, want)
				}
			}
			up, _ := plain.Usage(context.Background(), kp, ws)
			ub, _ := batched.Usage(context.Background(), kb, ws)
			if fmt.Sprint(up) != fmt.Sprint(ub) {
				t.Fatalf("usage: batched %v, plain %v", ub, up)
			}
		})
	}
}

// TestAutoPipelineStoreReloadsFlushedScript: after SCRIPT FLUSH the
// batched EVALSHA gets NOSCRIPT and the check falls back to EVAL.
func TestAutoPipelineStoreReloadsFlushedScript(t *testing.T) {
	for name, mk := range batchedClients() {
		t.Run(name, func(t *testing.T) {
			c := mk(t)
			s, k := mustBatchedStore(t, c), newKey()
			ws := []ratelimit.Window{{Limit: 5, Size: time.Second}}
			mustCheck(t, s, k, ws, "a")
			if err := c.ScriptFlush(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			if res := mustCheck(t, s, k, ws, "b"); !res.Allowed || res.Count != 2 {
				t.Fatalf("after SCRIPT FLUSH: %+v, want allowed count 2", res)
			}
			if res := mustCheck(t, s, k, ws, "c"); !res.Allowed || res.Count != 3 {
				t.Fatalf("after the reload: %+v, want allowed count 3", res)
			}
		})
	}
}

// TestAutoPipelineStoreHonoursDeadline: a Redis that accepts connections
// but never answers must not hold a check past its context deadline, so
// the limiter's 50 ms budget and breaker keep working with batching on.
func TestAutoPipelineStoreHonoursDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() }) // hold it open, never answer
		}
	}()
	// Short read timeout and no retries: Close waits for the stuck batch.
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: 300 * time.Millisecond, MaxRetries: -1, DisableIdentity: true, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	s := mustBatchedStore(t, c)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		_, err := s.Check(ctx, newKey(), []ratelimit.Window{{Limit: 5, Size: time.Second}}, "a")
		el := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("check %d: err %v, want deadline exceeded", i, err)
		}
		if el > 150*time.Millisecond {
			t.Fatalf("check %d took %v with a 50ms deadline", i, el)
		}
	}
}
