package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"payserver/internal/ratelimit"
	"payserver/internal/repo"
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

// TestReadyzServesASchemaAhead: an embedded database migrated by a newer
// payserver (a version this binary does not know) is served, and /readyz
// and the log say it is ahead.
func TestReadyzServesASchemaAhead(t *testing.T) {
	cfg := embeddedConfig(t, t.TempDir())
	ctx := context.Background()
	db, err := repo.Open(ctx, repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(cfg.DataDir, "payserver.db")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Migrate(ctx, db, repo.SQLite); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, 1)").Error; err != nil {
		t.Fatal(err)
	}
	if err := repo.Close(db); err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	m := NewMain(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	status, body := readyz(t, m)
	checks, _ := body["checks"].(map[string]any)
	if schema, _ := checks["schema"].(string); status != 200 || !strings.HasPrefix(schema, "ahead (99999 > ") || !strings.HasSuffix(schema, "), serving") {
		t.Errorf("/readyz on a schema ahead = %d %v, want 200 with schema \"ahead (99999 > N), serving\"", status, body)
	}
	if !strings.Contains(logs.String(), "database schema is ahead") {
		t.Errorf("the log does not say the schema is ahead:\n%s", logs.String())
	}
}
