package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// readyz runs m's GET /readyz and returns its status and body.
func readyz(t *testing.T, m *Main) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get("http://" + m.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestReadyzRedisDownFollowsThePolicy: with Redis unreachable, policy
// local and allow keep the instance ready, Redis shown degraded; deny takes
// it out of traffic, naming redis.
func TestReadyzRedisDownFollowsThePolicy(t *testing.T) {
	for _, tt := range []struct {
		policy     string
		wantStatus int
		wantRedis  string
	}{
		{"local", 200, "degraded (deciding in process)"},
		{"allow", 200, "degraded (admitting without limits)"},
		{"deny", 503, "connection refused"},
	} {
		t.Run(tt.policy, func(t *testing.T) {
			cfg := embeddedConfig(t, t.TempDir())
			cfg.RedisMode, cfg.RedisAddrs = RedisStandalone, []string{testutil.FreeAddr(t)}
			cfg.Limiter.Policy = ratelimit.Policy(tt.policy)
			m := NewMain(cfg, slog.New(slog.DiscardHandler))
			if err := m.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			status, body := readyz(t, m)
			checks, _ := body["checks"].(map[string]any)
			if redis, _ := checks["redis"].(string); status != tt.wantStatus || !strings.Contains(redis, tt.wantRedis) {
				t.Errorf("/readyz under %s with Redis down = %d %v, want %d with redis %q", tt.policy, status, body, tt.wantStatus, tt.wantRedis)
			}
		})
	}
}
