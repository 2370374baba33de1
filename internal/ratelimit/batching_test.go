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
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// batchedClients are the backends the store is checked on, both ways.
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

// batchings are the ways a redisstore.Store can send checks: one script call per
// check ("plain"), or one per batch of one key's concurrent checks.
var batchings = map[string]redisstore.Options{
	"plain":    {},
	"coalesce": {Coalesce: true},
}

func mustStoreWith(t *testing.T, c redis.UniversalClient, o redisstore.Options) *redisstore.Store {
	t.Helper()
	o.Prefix = "test:rl:"
	s, err := redisstore.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// forBatchings runs f for every batching on every backend.
func forBatchings(t *testing.T, f func(t *testing.T, c redis.UniversalClient, o redisstore.Options)) {
	for name, mk := range batchedClients() {
		for bname, o := range batchings {
			t.Run(name+"/"+bname, func(t *testing.T) { f(t, mk(t), o) })
		}
	}
}

// TestBatchedExactUnderConcurrency is TestExactUnderConcurrency with checks
// batched: 64 callers, demand 8x the limit, exactly the limit admitted.
func TestBatchedExactUnderConcurrency(t *testing.T) {
	forBatchings(t, func(t *testing.T, c redis.UniversalClient, o redisstore.Options) {
		s := mustStoreWith(t, c, o)
		for round := 0; round < 3; round++ {
			w := ratelimit.Window{Limit: 100, Size: time.Minute}
			if got := hammer(t, s, newKey(), w, 64, 13); got != w.Limit {
				t.Fatalf("round %d: admitted %d, want exactly %d", round, got, w.Limit)
			}
		}
	})
}

// TestCoalescerBatches: under concurrency the coalescer really sends many
// checks per script call (otherwise the "coalesce" runs above would test
// single calls only), and serially it sends one call per check.
func TestCoalescerBatches(t *testing.T) {
	for name, mk := range batchedClients() {
		t.Run(name, func(t *testing.T) { testCoalescerBatches(t, mk(t)) })
	}
}

func testCoalescerBatches(t *testing.T, c redis.UniversalClient) {
	s := mustStoreWith(t, c, redisstore.Options{Coalesce: true})
	k := newKey()
	ws := []ratelimit.Window{{Limit: 1000, Size: time.Minute}}
	for i := range 5 {
		mustCheck(t, s, k, ws, fmt.Sprint("serial", i))
	}
	if calls, checks := s.CoalesceStats(); calls != 5 || checks != 5 {
		t.Fatalf("serial: %d calls for %d checks, want 5 for 5", calls, checks)
	}
	hammer(t, s, k, ws[0], 64, 20)
	calls, checks := s.CoalesceStats()
	if checks != 5+64*20 {
		t.Fatalf("%d checks counted, want %d", checks, 5+64*20)
	}
	if mean := float64(checks) / float64(calls); mean < 2 {
		t.Fatalf("64 concurrent callers: %d calls for %d checks (mean batch %.1f), want batches", calls, checks, mean)
	}
	t.Logf("64 callers: %d calls for %d checks", calls, checks)
}

// TestBatchedStoreSameAnswers replays one sequence of checks (two windows,
// duplicates, refusals, a release) through the plain and the batched store
// on two fresh keys and wants the same answers, retry-after and admission
// time aside (they depend on the instant; an admission has a time, a
// refusal none).
func TestBatchedStoreSameAnswers(t *testing.T) {
	forBatchings(t, func(t *testing.T, c redis.UniversalClient, o redisstore.Options) {
		plain, _ := redisstore.New(c, redisstore.Options{Prefix: "test:rl:"})
		batched := mustStoreWith(t, c, o)
		ws := []ratelimit.Window{{Limit: 3, Size: 10 * time.Second}, {Limit: 4, Size: time.Minute}}
		seq := []string{"a", "b", "a", "c", "d", "c", "-c", "e", "f", "a", "g"}
		kp, kb := newKey(), newKey()
		for i, m := range seq {
			if m[0] == '-' {
				for _, s := range []struct {
					st ratelimit.Store
					k  ratelimit.Key
				}{{plain, kp}, {batched, kb}} {
					if _, err := s.st.Release(context.Background(), ratelimit.KeyWindows(s.k, ws), m[1:]); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			want := mustCheck(t, plain, kp, ws, m)
			got := mustCheck(t, batched, kb, ws, m)
			for _, r := range []ratelimit.StoreResult{got, want} {
				if r.At.IsZero() == r.Allowed {
					t.Fatalf("step %d (%s): %+v: want an admission time for an admission only", i, m, r)
				}
			}
			want.RetryAfter, got.RetryAfter = 0, 0
			want.At, got.At = time.Time{}, time.Time{}
			want.Now, got.Now = time.Time{}, time.Time{}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d (%s): batched %+v, plain %+v", i, m, got, want)
			}
		}
		up, err1 := plain.Usage(context.Background(), ratelimit.KeyWindows(kp, ws))
		ub, err2 := batched.Usage(context.Background(), ratelimit.KeyWindows(kb, ws))
		if err1 != nil || err2 != nil || len(up) != len(ws) || fmt.Sprint(up) != fmt.Sprint(ub) {
			t.Fatalf("usage: batched %v, plain %v", ub, up)
		}
	})
}

// TestBatchedStoreReloadsFlushedScript: after SCRIPT FLUSH the batched
// EVALSHA gets NOSCRIPT and the check falls back to EVAL.
func TestBatchedStoreReloadsFlushedScript(t *testing.T) {
	forBatchings(t, func(t *testing.T, c redis.UniversalClient, o redisstore.Options) {
		s, k := mustStoreWith(t, c, o), newKey()
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

// TestBatchedStoreHonoursDeadline: a Redis that accepts connections but
// never answers must not hold a check past its context deadline, so the
// limiter's 50 ms budget and breaker keep working with batching on.
func TestBatchedStoreHonoursDeadline(t *testing.T) {
	for name, o := range batchings {
		t.Run(name, func(t *testing.T) { testHonoursDeadline(t, o) })
	}
}

func testHonoursDeadline(t *testing.T, o redisstore.Options) {
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
	// Short read timeout, no retries, deadlines honoured as in cmd/payserver.
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: 300 * time.Millisecond, ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	s := mustStoreWith(t, c, o)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		_, err := s.Check(ctx, ratelimit.KeyWindows(newKey(), []ratelimit.Window{{Limit: 5, Size: time.Second}}), "a", 0)
		el := time.Since(start)
		cancel()
		// The client turns the deadline into the socket's read deadline
		// (a net timeout), or the wait ends on ctx.
		var ne net.Error
		if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("check %d: err %v, want a deadline or timeout error", i, err)
		}
		if el > 150*time.Millisecond {
			t.Fatalf("check %d took %v with a 50ms deadline", i, el)
		}
	}
}
