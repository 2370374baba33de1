package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"payserver/internal/httpapi"
	"payserver/internal/repo"
	"payserver/internal/testutil"
)

// TestSchemaCheck follows an instance on an empty database through a
// migrate: not ready while behind, a read at most every schemaCheckEvery,
// ready once a read sees the migrations, one log line per change.
func TestSchemaCheck(t *testing.T) {
	embedded := []int64{1, 2, 3}
	applied := []int64(nil)
	var readErr error
	reads := 0
	read := func(context.Context) (repo.Schema, error) {
		reads++
		if readErr != nil {
			return repo.Schema{}, readErr
		}
		return repo.CompareSchema(applied, embedded), nil
	}
	clock := testutil.NewClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	var logs testutil.LogBuffer
	c := newSchemaCheck(read, clock.Now, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	want := func(step string, got, want httpapi.Readiness, wantReads int) {
		t.Helper()
		if got != want || reads != wantReads {
			t.Errorf("%s: got %+v after %d reads, want %+v after %d", step, got, reads, want, wantReads)
		}
	}

	behind := httpapi.Readiness{NotReady: true, Text: "behind (0 < 3): run payserver migrate"}
	want("start", c.Check(ctx), behind, 1)
	if got := c.Behind(ctx); got != "behind (0 < 3)" || reads != 1 {
		t.Errorf("Behind = %q after %d reads, want behind (0 < 3) from the same read", got, reads)
	}
	clock.Advance(schemaCheckEvery - time.Millisecond)
	want("within the period", c.Check(ctx), behind, 1)
	applied = []int64{0, 1, 2, 3} // payserver migrate ran
	want("migrated, still within the period", c.Check(ctx), behind, 1)
	clock.Advance(time.Millisecond)
	want("migrated, period over", c.Check(ctx), httpapi.Readiness{}, 2)
	if got := c.Behind(ctx); got != "" {
		t.Errorf("Behind = %q once migrated, want empty", got)
	}

	clock.Advance(schemaCheckEvery)
	readErr = errors.New("connection refused")
	want("read fails", c.Check(ctx), httpapi.Readiness{NotReady: true, Text: "cannot read the schema version: connection refused"}, 3)
	want("read fails again", c.Check(ctx), httpapi.Readiness{NotReady: true, Text: "cannot read the schema version: connection refused"}, 4)
	readErr = nil
	applied = []int64{0, 1, 2, 3, 4} // a newer payserver migrated
	want("ahead", c.Check(ctx), httpapi.Readiness{Text: "ahead (4 > 3), serving"}, 5)

	log := logs.String()
	for _, line := range []string{"database schema is behind", "database schema is current", "cannot read the database schema version", "database schema is ahead"} {
		if n := strings.Count(log, line); n != 1 {
			t.Errorf("%d log lines say %q, want 1:\n%s", n, line, log)
		}
	}
	if !strings.Contains(log, "`payserver migrate`") {
		t.Errorf("the behind line does not name the command to run:\n%s", log)
	}
}
