package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"payserver/internal/httpapi"
	"payserver/internal/testutil"
)

// TestRedisPersistence: with a calendar window in force, a Redis that keeps
// neither AOF nor RDB stays ready, but /readyz's redis detail and one WARN
// line say that a restart forgets the calendar caps, and the gauge is 0; a
// refused CONFIG says so; a Redis with AOF or RDB, or limits without a
// calendar window, add nothing. A reconnect reads the settings again.
func TestRedisPersistence(t *testing.T) {
	settings := map[string]string{"appendonly": "no", "save": ""}
	var readErr error
	reads := 0
	read := func(context.Context) (map[string]string, error) {
		reads++
		return settings, readErr
	}
	calendar := true
	clock := testutil.NewClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	var logs testutil.LogBuffer
	p := newRedisPersistence(read, func() bool { return calendar }, clock.Now, slog.New(slog.NewTextHandler(&logs, nil)))
	ping := httpapi.Readiness{}
	check := p.Readiness(func(context.Context) httpapi.Readiness { return ping })
	ctx := context.Background()

	r := check(ctx)
	if r.NotReady || !strings.Contains(r.Text, "a Redis restart forgets the calendar caps") || !strings.Contains(r.Text, `appendonly no, save ""`) {
		t.Errorf("no persistence: %+v, want ready with the warning", r)
	}
	check(ctx)
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "forgets the calendar caps") {
		t.Errorf("%d WARN lines, want 1:\n%s", n, logs.String())
	}
	if v, ok := p.Gauge(); !ok || v != 0 || reads != 1 {
		t.Errorf("gauge %v %v after %d reads, want 0 from the one read", v, ok, reads)
	}

	// Redis restarted with AOF on: the reconnect reads again at once.
	ping = httpapi.Readiness{NotReady: true, Text: "connection refused"}
	check(ctx)
	ping, settings = httpapi.Readiness{}, map[string]string{"appendonly": "yes", "save": ""}
	if r := check(ctx); r.Text != "" || reads != 2 {
		t.Errorf("after the reconnect: %+v after %d reads, want plain ok from a new read", r, reads)
	}
	if v, ok := p.Gauge(); !ok || v != 1 {
		t.Errorf("gauge %v %v, want 1", v, ok)
	}

	// CONFIG refused (an ACL user without +config): said, not guessed.
	readErr = errors.New("NOPERM this user has no permissions to run the 'config|get' command")
	clock.Advance(redisPersistenceEvery)
	if r := check(ctx); r.NotReady || !strings.Contains(r.Text, "CONFIG GET appendonly/save is refused or renamed") {
		t.Errorf("CONFIG refused: %+v", r)
	}
	if _, ok := p.Gauge(); ok {
		t.Error("the gauge has a value while the settings are unknown")
	}

	// Without a calendar window nothing is at risk.
	calendar, readErr, settings = false, nil, map[string]string{"appendonly": "no", "save": ""}
	clock.Advance(redisPersistenceEvery)
	if r := check(ctx); r.Text != "" {
		t.Errorf("no calendar window: %+v, want plain ok", r)
	}

	// RDB snapshots alone keep the data.
	calendar, settings = true, map[string]string{"appendonly": "no", "save": "3600 1 300 100"}
	clock.Advance(redisPersistenceEvery)
	if r := check(ctx); r.Text != "" {
		t.Errorf("RDB snapshots: %+v, want plain ok", r)
	}
}
