package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envFrom(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfigEnvWinsOverYAML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("httpAddr: 127.0.0.1:9000\nlimiter:\n  policy: deny\n  timeout: 80ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(envFrom(map[string]string{
		"PAYSERVER_CONFIG":         path,
		"PAYSERVER_HTTP_ADDR":      "127.0.0.1:9100",
		"PAYSERVER_REDIS_ADDRS":    "a:1, b:2,c:3",
		"PAYSERVER_INSTANCE_COUNT": "4",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:9100" || cfg.Limiter.Policy != "deny" || cfg.Limiter.Timeout != 80*time.Millisecond {
		t.Fatalf("got %+v", cfg)
	}
	if len(cfg.RedisAddrs) != 3 || cfg.LocalShare() != 0.25 {
		t.Fatalf("redis %v share %v", cfg.RedisAddrs, cfg.LocalShare())
	}
}

func TestLoadConfigRefusesBadValues(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"unknown yaml field": {"PAYSERVER_CONFIG": writeTemp(t, "htpAddr: x\n")},
		"bad policy":         {"PAYSERVER_LIMITER_POLICY": "maybe"},
		"bad duration":       {"PAYSERVER_CHANNEL_TIMEOUT": "soon"},
		"bad bool":           {"PAYSERVER_AUTO_MIGRATE": "yes please"},
		"zero instances":     {"PAYSERVER_INSTANCE_COUNT": "0"},
		"bad channel code":   {"PAYSERVER_CHANNELS": "alipay"},
		"missing config":     {"PAYSERVER_CONFIG": "/nonexistent/p.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := LoadConfig(envFrom(env)); err == nil {
				t.Fatal("LoadConfig accepted it")
			}
		})
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigLogValueHidesSecrets(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MySQLDSN = "app:Pa55word!@tcp(127.0.0.1:3306)/payserver"
	cfg.RedisPassword, cfg.AdminToken = "redis-secret", "admin-secret"
	cfg.Nacos.Username, cfg.Nacos.Password = "nacos", "nacos-secret"
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("start", "config", cfg)
	for _, secret := range []string{"Pa55word!", "redis-secret", "admin-secret", "nacos-secret"} {
		if strings.Contains(buf.String(), secret) {
			t.Fatalf("log contains %q: %s", secret, buf.String())
		}
	}
	if !strings.Contains(buf.String(), "app:***@tcp") {
		t.Fatalf("DSN not shown redacted: %s", buf.String())
	}
}

func TestCheckLimitsCommand(t *testing.T) {
	good := writeTemp(t, "limits:\n  ONLINE_PAY:ALIPAY: 100\n  REFUND:ALIPAY: [{limit: 20, window: 1s}, {limit: 600, window: 1m}]\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"check-limits", good}, envFrom(nil), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "REFUND:ALIPAY") || !strings.Contains(out.String(), "20/1s+600/1m") {
		t.Fatalf("output %q", out.String())
	}
	out.Reset()
	errOut.Reset()
	bad := writeTemp(t, "limits:\n  bad: 1\n")
	if code := run([]string{"check-limits", bad}, envFrom(nil), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "INVALID") {
		t.Fatalf("bad document: exit %d, %q", code, errOut.String())
	}
	if code := run([]string{"check-limits"}, envFrom(nil), &out, &errOut); code != 2 {
		t.Fatalf("usage error: exit %d", code)
	}
}

// TestBatchingDefaults: the shipped defaults, with a YAML file that does not
// name them and with none: limiter coalescing and database group commit on,
// each can be switched off by env.
func TestBatchingDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("channels:\n  ALIPAY: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range []map[string]string{{"PAYSERVER_CONFIG": path}, {"PAYSERVER_CONFIG": "/dev/null"}} {
		cfg, err := LoadConfig(envFrom(env))
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.Limiter.Coalesce || !cfg.DBGroupCommit || !cfg.DBBatchReads {
			t.Fatalf("%v: coalesce %v, group commit %v, batch reads %v; want all on",
				env, cfg.Limiter.Coalesce, cfg.DBGroupCommit, cfg.DBBatchReads)
		}
	}
	cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": path,
		"PAYSERVER_LIMITER_COALESCE": "false", "PAYSERVER_DB_GROUP_COMMIT": "false",
		"PAYSERVER_DB_BATCH_READS": "false", "PAYSERVER_DB_MAX_BATCH": "16"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limiter.Coalesce || cfg.DBGroupCommit || cfg.DBBatchReads || cfg.DBMaxBatch != 16 {
		t.Fatalf("env not applied: %+v", cfg)
	}
}
