package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/testutil"
)

// TestCheckScriptBatchEqualsSingles: one call of checkScript with many
// members must decide each member exactly as one call per member, in the
// same order, would: same admissions, counts, binding windows and
// duplicates (retry-after aside, which depends on the instant). Random
// sequences with repeated members, two windows, limits that fill mid-batch.
func TestCheckScriptBatchEqualsSingles(t *testing.T) {
	backends := map[string]func(t *testing.T) redis.UniversalClient{
		"redis": func(t *testing.T) redis.UniversalClient { return testutil.MustRedis(t) },
		"embedded": func(t *testing.T) redis.UniversalClient {
			_, c := testutil.MustMiniredis(t)
			return c
		},
	}
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			c := mk(t)
			s, err := NewRedisStore(c, "test:rl:")
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			ctx := context.Background()
			for round := 0; round < 80; round++ {
				ws := []Window{{Limit: int64(1 + rng.IntN(8)), Size: 10 * time.Second}, {Limit: int64(1 + rng.IntN(12)), Size: time.Minute}}
				if round%2 == 1 {
					// Roomy: no window can fill within the call (the
					// script's add-first path), or only the second can.
					ws[0].Limit += 40
					ws[1].Limit += int64(40 * rng.IntN(2))
				}
				single, batch := Key{BizType: testutil.UniqueName("S"), Channel: "X"}, Key{BizType: testutil.UniqueName("B"), Channel: "X"}
				// Some members already in the windows before the batch.
				for i := range rng.IntN(4) {
					m := fmt.Sprintf("pre%d", i)
					mustSingle(t, s, single, ws, m)
					mustSingle(t, s, batch, ws, m)
				}
				members := make([]string, 1+rng.IntN(30))
				for i := range members {
					if i > 0 && rng.IntN(4) == 0 {
						members[i] = members[rng.IntN(i)] // repeat within the batch
					} else {
						members[i] = fmt.Sprintf("m%d", rng.IntN(40)) // may repeat a pre member too
					}
				}
				if rng.IntN(3) == 0 {
					members = append(members, "pre0")
				}
				want := make([]StoreResult, len(members))
				for i, m := range members {
					want[i] = mustSingle(t, s, single, ws, m)
				}
				res, err := s.runCheck(ctx, s.keys(batch, ws), checkArgs(ws, members...))
				if err != nil {
					t.Fatal(err)
				}
				got := make([]StoreResult, len(members))
				if err := parseCheckReply(res, len(ws), got); err != nil {
					t.Fatal(err)
				}
				for i := range members {
					if (got[i].RetryAfter > 0) != (want[i].RetryAfter > 0) {
						t.Fatalf("round %d member %d (%s): retry-after %v batched, %v single", round, i, members[i], got[i].RetryAfter, want[i].RetryAfter)
					}
					got[i].RetryAfter, want[i].RetryAfter = 0, 0
					if got[i] != want[i] {
						t.Fatalf("round %d, windows %v, members %v: member %d (%s) batched %+v, single %+v",
							round, ws, members, i, members[i], got[i], want[i])
					}
				}
				us, err1 := s.Usage(ctx, single, ws)
				ub, err2 := s.Usage(ctx, batch, ws)
				if err1 != nil || err2 != nil || len(us) != 2 || fmt.Sprint(us) != fmt.Sprint(ub) {
					t.Fatalf("round %d: usage batched %v, single %v", round, ub, us)
				}
			}
		})
	}
}

// TestCheckScriptRetryAfterInBatch: members refused in the call that filled
// the window wait for the whole window (the members they wait for were
// added at this instant); those refused by a window full from before wait
// for its oldest member.
func TestCheckScriptRetryAfterInBatch(t *testing.T) {
	c := testutil.MustRedis(t)
	s, _ := NewRedisStore(c, "test:rl:")
	ctx := context.Background()
	k := Key{BizType: testutil.UniqueName("R"), Channel: "X"}
	ws := []Window{{Limit: 2, Size: 10 * time.Second}}
	mustSingle(t, s, k, ws, "old")
	time.Sleep(300 * time.Millisecond)
	res, err := s.runCheck(ctx, s.keys(k, ws), checkArgs(ws, "a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]StoreResult, 3)
	if err := parseCheckReply(res, 1, got); err != nil {
		t.Fatal(err)
	}
	if !got[0].Allowed || got[1].Allowed || got[2].Allowed {
		t.Fatalf("got %+v, want a admitted, b and c refused", got)
	}
	// b must wait for "old" to leave: about 10s - 300ms.
	if w := got[1].RetryAfter; w < 9*time.Second || w > 9800*time.Millisecond {
		t.Fatalf("b retry-after %v, want ~9.7s (until the oldest member leaves)", w)
	}
	ws2 := []Window{{Limit: 1, Size: 10 * time.Second}}
	k2 := Key{BizType: testutil.UniqueName("R"), Channel: "X"}
	res, _ = s.runCheck(ctx, s.keys(k2, ws2), checkArgs(ws2, "x", "y"))
	got = got[:2]
	if err := parseCheckReply(res, 1, got); err != nil {
		t.Fatal(err)
	}
	if !got[0].Allowed || got[1].Allowed || got[1].RetryAfter != 10*time.Second {
		t.Fatalf("got %+v, want x admitted and y refused for the whole 10s window", got)
	}
}

func mustSingle(t *testing.T, s *RedisStore, k Key, ws []Window, m string) StoreResult {
	t.Helper()
	r, err := s.Check(context.Background(), k, ws, m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestWarmLoadsScriptsOnEveryMaster: after SCRIPT FLUSH, Warm puts the
// scripts on every node that holds keys (each Cluster master), so the first
// checks need no NOSCRIPT round trip.
func TestWarmLoadsScriptsOnEveryMaster(t *testing.T) {
	ctx := context.Background()
	hashes := []string{checkScript.Hash(), releaseScript.Hash(), usageScript.Hash()}
	t.Run("redis", func(t *testing.T) {
		c := testutil.MustRedis(t)
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		s, _ := NewRedisStore(c, "test:rl:")
		if err := s.Warm(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := c.ScriptExists(ctx, hashes...).Result()
		if err != nil || !got[0] || !got[1] || !got[2] {
			t.Fatalf("SCRIPT EXISTS after Warm = %v, %v; want all loaded", got, err)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c := testutil.MustCluster(t)
		if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.ScriptFlush(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
		s, _ := NewRedisStore(c, "test:rl:")
		if err := s.Warm(ctx); err != nil {
			t.Fatal(err)
		}
		var masters atomic.Int32 // ForEachMaster runs concurrently
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			got, err := m.ScriptExists(ctx, hashes...).Result()
			if err != nil || !got[0] || !got[1] || !got[2] {
				return fmt.Errorf("master %s: SCRIPT EXISTS = %v, %v", m.Options().Addr, got, err)
			}
			masters.Add(1)
			return nil
		})
		if err != nil || masters.Load() < 3 {
			t.Fatalf("after Warm: %v (%d masters)", err, masters.Load())
		}
	})
}
