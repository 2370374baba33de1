package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestRedisLoggerIsStructuredAndRateLimited: go-redis's lines become JSON
// records at warn level, and a retry storm is cut to a few lines.
func TestRedisLoggerIsStructuredAndRateLimited(t *testing.T) {
	var buf bytes.Buffer
	l := newRedisLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	for i := 0; i < 100; i++ {
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v", 5, "connection refused")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) > redisLogBurst {
		t.Errorf("%d lines for 100 pool errors, want at most %d", len(lines), redisLogBurst)
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		if rec["level"] != "WARN" || rec["component"] != "go-redis" || !strings.Contains(rec["detail"].(string), "failed to dial") {
			t.Errorf("record %v", rec)
		}
	}
}

// TestStartBannerFollowsLogFormat: with the JSON log format the banner is
// one JSON record; with text it is the plain-text hint. Both say embedded
// mode is single-instance.
func TestStartBannerFollowsLogFormat(t *testing.T) {
	for _, format := range []LogFormat{LogJSON, LogText} {
		t.Run(string(format), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.LogFormat = format
			var out bytes.Buffer
			startBanner(cfg, "127.0.0.1:8080", newLogger(cfg, &out), &out)
			s := strings.TrimSpace(out.String())
			if !strings.Contains(s, "single-instance") || !strings.Contains(s, "curl") {
				t.Errorf("banner %q", s)
			}
			var rec map[string]any
			isJSON := json.Unmarshal([]byte(s), &rec) == nil
			if isJSON != (format == LogJSON) {
				t.Errorf("banner is JSON = %v for format %s: %q", isJSON, format, s)
			}
		})
	}
}
