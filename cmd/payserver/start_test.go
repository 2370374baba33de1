package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"payserver/internal/httpapi"
	"payserver/internal/testutil"
)

// embeddedConfig is the embedded default on a random port, in dir.
func embeddedConfig(t testing.TB, dir string) Config {
	t.Helper()
	httpapi.SetReleaseMode()
	cfg := DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.LimitsFile = filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(cfg.LimitsFile, []byte("limits:\n  ONLINE_PAY:ALIPAY: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPortInUseFailsFirst: with the port taken, the start fails on the
// bind before any database, data dir or history is created, and without a
// bogus error logged before the real one.
func TestPortInUseFailsFirst(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg := embeddedConfig(t, t.TempDir())
	cfg.HTTPAddr = held.Addr().String()
	var logs testutil.LogBuffer
	m := NewMain(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	err = m.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Run = %v, want a listen error", err)
	}
	if _, statErr := os.Stat(cfg.DataDir); !os.IsNotExist(statErr) {
		t.Errorf("the data dir was created before the bind failed (stat: %v)", statErr)
	}
	if s := logs.String(); strings.Contains(s, "level=ERROR") || strings.Contains(s, "context canceled") {
		t.Errorf("logs before the bind error:\n%s", s)
	}
}

// TestDataDirIsSingleInstance: a second process on the same data dir is
// refused with a clear message while the first runs, and starts once the
// first stopped.
func TestDataDirIsSingleInstance(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	first := NewMain(embeddedConfig(t, dir), log)
	if err := first.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := NewMain(embeddedConfig(t, dir), log)
	err := second.Run(context.Background())
	if err == nil {
		_ = second.Close()
		t.Fatal("a second instance started on the same data dir")
	}
	if !strings.Contains(err.Error(), "locked by another payserver process") || !strings.Contains(err.Error(), "single-instance") {
		t.Errorf("second start error %q does not say the data dir is locked and embedded mode is single-instance", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := NewMain(embeddedConfig(t, dir), log)
	if err := third.Run(context.Background()); err != nil {
		t.Fatalf("start after the first stopped: %v", err)
	}
	_ = third.Close()
}

// TestFailedStartLogsTheFailureThenStops: a start that fails logs why,
// then that payserver stopped, in that order.
func TestFailedStartLogsTheFailureThenStops(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run(nil, envFrom(map[string]string{
		"PAYSERVER_HTTP_ADDR": held.Addr().String(), "PAYSERVER_DATA_DIR": filepath.Join(dir, "data"),
		"PAYSERVER_LIMITS_FILE": filepath.Join(dir, "limits.yaml"),
	}), &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit code %d, want 1; log:\n%s", code, stderr.String())
	}
	logs := stderr.String()
	failed, stopped := strings.Index(logs, "payserver failed to start"), strings.Index(logs, "payserver stopped")
	if failed < 0 || stopped < 0 || stopped < failed {
		t.Errorf("log has \"payserver failed to start\" at %d and \"payserver stopped\" at %d; want both, the failure first:\n%s", failed, stopped, logs)
	}
}

// TestBadLimitsAtStartSaysRefused: a limits document that was read and
// refused at start is named as refused, with why, in the warning that no
// limits are in force, not as "no document".
func TestBadLimitsAtStartSaysRefused(t *testing.T) {
	cfg := embeddedConfig(t, t.TempDir())
	if err := os.WriteFile(cfg.LimitsFile, []byte("limits:\n  bad key: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	m := NewMain(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "no limits loaded after") {
			line = l
		}
	}
	if !strings.Contains(line, "refused") || !strings.Contains(line, "bad key") || strings.Contains(line, "no document") {
		t.Errorf("start warning %q; want it to say the document was refused and why", line)
	}
}
