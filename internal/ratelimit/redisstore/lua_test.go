package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/ratelimit"

	"github.com/redis/go-redis/v9"

	"payserver/internal/testutil"
)

// TestCheckScriptRetryAfterInBatch: members refused in the call that filled
// the window wait for the whole window (the members they wait for were
// added at this instant); those refused by a window full from before wait
// for its oldest member.
func TestCheckScriptRetryAfterInBatch(t *testing.T) {
	c := testutil.MustRedis(t)
	s, _ := New(c, Options{Prefix: "test:rl:"})
	ctx := context.Background()
	k := ratelimit.Key{BizType: testutil.UniqueName("R"), Channel: "X"}
	ws := []ratelimit.Window{{Limit: 2, Size: 10 * time.Second}}
	mustSingle(t, s, k, ws, "old")
	time.Sleep(300 * time.Millisecond)
	res, err := s.runCheck(ctx, ratelimit.KeyWindows(k, ws), s.checkKeys(ratelimit.KeyWindows(k, ws)), checkArgs(ratelimit.KeyWindows(k, ws), checkMember{id: "a"}, checkMember{id: "b"}, checkMember{id: "c"}))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]ratelimit.StoreResult, 3)
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
	ws2 := []ratelimit.Window{{Limit: 1, Size: 10 * time.Second}}
	k2 := ratelimit.Key{BizType: testutil.UniqueName("R"), Channel: "X"}
	res, _ = s.runCheck(ctx, ratelimit.KeyWindows(k2, ws2), s.checkKeys(ratelimit.KeyWindows(k2, ws2)), checkArgs(ratelimit.KeyWindows(k2, ws2), checkMember{id: "x"}, checkMember{id: "y"}))
	got = got[:2]
	if err := parseCheckReply(res, 1, got); err != nil {
		t.Fatal(err)
	}
	if !got[0].Allowed || got[1].Allowed || got[1].RetryAfter != 10*time.Second {
		t.Fatalf("got %+v, want x admitted and y refused for the whole 10s window", got)
	}
}

func mustSingle(t *testing.T, s *Store, k ratelimit.Key, ws []ratelimit.Window, m string) ratelimit.StoreResult {
	t.Helper()
	r, err := s.Check(context.Background(), ratelimit.KeyWindows(k, ws), m, 0)
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
		s, _ := New(c, Options{Prefix: "test:rl:"})
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
		s, _ := New(c, Options{Prefix: "test:rl:"})
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
