package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestRedisRestartsSeeANewRunID: the first read knows no restart; a read
// that fails changes nothing; a changed run id is a restart at the time it
// is seen, logged at WARN when a calendar window is in force.
func TestRedisRestartsSeeANewRunID(t *testing.T) {
	ids, readErr := map[string]string{"": "aaa"}, error(nil)
	clock := testutil.NewClock(time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC))
	var logs testutil.LogBuffer
	r := newRedisRestarts(func(context.Context) (map[string]string, error) { return ids, readErr },
		func() bool { return true }, clock.Now, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	if at := r.Check(ctx); !at.IsZero() {
		t.Fatalf("first read: restart at %v, want none", at)
	}
	clock.Advance(time.Minute)
	readErr = errors.New("connection refused")
	if at := r.Check(ctx); !at.IsZero() {
		t.Fatalf("failed read: restart at %v, want none", at)
	}
	clock.Advance(time.Minute)
	ids, readErr = map[string]string{"": "bbb"}, nil
	want := clock.Now()
	if at := r.Check(ctx); !at.Equal(want) {
		t.Fatalf("new run id: restart at %v, want %v", at, want)
	}
	clock.Advance(time.Minute)
	if at := r.Check(ctx); !at.Equal(want) {
		t.Fatalf("same run id again: restart at %v, want still %v", at, want)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "run id changed") {
		t.Errorf("%d WARN lines, want 1:\n%s", n, logs.String())
	}
}
