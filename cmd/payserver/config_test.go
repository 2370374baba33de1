package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// envFrom turns a map into an environment list, as os.Environ returns.
func envFrom(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func TestLoadConfigEnvWinsOverYAML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("httpAddr: 127.0.0.1:9000\nlimiter:\n  policy: deny\n  timeout: 80ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(envFrom(map[string]string{
		"PAYSERVER_CONFIG":         path,
		"PAYSERVER_HTTP_ADDR":      "127.0.0.1:9100",
		"PAYSERVER_REDIS_ADDR":     "a:1, b:2,c:3",
		"PAYSERVER_INSTANCE_COUNT": "4",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:9100" || cfg.Limiter.Policy != ratelimit.PolicyDeny || cfg.Limiter.Timeout != 80*time.Millisecond {
		t.Fatalf("got %+v", cfg)
	}
	if len(cfg.RedisAddrs) != 3 || cfg.LocalShare() != 0.25 {
		t.Fatalf("redis %v share %v", cfg.RedisAddrs, cfg.LocalShare())
	}
}

func TestLoadConfigRefusesBadValues(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"unknown yaml field":  {"PAYSERVER_CONFIG": writeTemp(t, "htpAddr: x\n")},
		"bad policy":          {"PAYSERVER_LIMITER_POLICY": "maybe"},
		"bad duration":        {"PAYSERVER_CHANNEL_TIMEOUT": "soon"},
		"bad bool":            {"PAYSERVER_AUTO_MIGRATE": "yes please"},
		"zero instances":      {"PAYSERVER_INSTANCE_COUNT": "0"},
		"bad channel code":    {"PAYSERVER_CHANNELS": "alipay"},
		"missing config":      {"PAYSERVER_CONFIG": "/nonexistent/p.yaml"},
		"unknown nested yaml": {"PAYSERVER_CONFIG": writeTemp(t, "limiter:\n  polcy: deny\n")},
		"bad redis mode":      {"PAYSERVER_REDIS_MODE": "replicated", "PAYSERVER_REDIS_ADDR": "a:1"},
		"bad log format":      {"PAYSERVER_LOG_FORMAT": "xml"},
		"bad log level":       {"PAYSERVER_LOG_LEVEL": "loud"},
		"bad yaml policy":     {"PAYSERVER_CONFIG": writeTemp(t, "limiter:\n  policy: maybe\n")},
		"sentinel no master":  {"PAYSERVER_REDIS_MODE": "sentinel", "PAYSERVER_REDIS_SENTINELS": "a:1"},
		"sentinel no list":    {"PAYSERVER_REDIS_MODE": "sentinel", "PAYSERVER_REDIS_MASTER": "m"},
		"sentinel and addr":   {"PAYSERVER_REDIS_MODE": "sentinel", "PAYSERVER_REDIS_MASTER": "m", "PAYSERVER_REDIS_SENTINELS": "a:1", "PAYSERVER_REDIS_ADDR": "b:2"},
		"sentinels no mode":   {"PAYSERVER_REDIS_SENTINELS": "a:1", "PAYSERVER_REDIS_MASTER": "m"},
		"standalone two":      {"PAYSERVER_REDIS_MODE": "standalone", "PAYSERVER_REDIS_ADDR": "a:1,b:2"},
		"cluster none":        {"PAYSERVER_REDIS_MODE": "cluster"},
		"tls cert no key":     {"PAYSERVER_REDIS_TLS_CERT": "/x.crt"},
		"mysql tls sqlite":    {"PAYSERVER_MYSQL_TLS_CA": "/ca.crt"},
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
	cfg.RedisMode, cfg.RedisSentinels, cfg.RedisMaster = RedisSentinel, []string{"s:1"}, "m"
	cfg.RedisSentinelUsername, cfg.RedisSentinelPassword = "sentinel-user", "sentinel-secret"
	cfg.ChannelGatewayURL, cfg.ChannelGatewaySecret = "http://127.0.0.1:9000", "gateway-secret"
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("start", "config", cfg)
	for _, secret := range []string{"Pa55word!", "redis-secret", "admin-secret", "nacos-secret", "sentinel-secret", "gateway-secret"} {
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
// each can be switched off in the settings file (benchmarks' "off" sides).
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
	off := writeTemp(t, "limiter: {coalesce: false}\ndbGroupCommit: false\ndbBatchReads: false\ndbMaxBatch: 16\n")
	cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": off}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limiter.Coalesce || cfg.DBGroupCommit || cfg.DBBatchReads || cfg.DBMaxBatch != 16 {
		t.Fatalf("settings file not applied: %+v", cfg)
	}
}

// TestLoadConfigTypedValues: modes, policies, levels and durations come out
// of LoadConfig as their types, from YAML and from env alike.
func TestLoadConfigTypedValues(t *testing.T) {
	path := writeTemp(t, "redisMode: sentinel\nredisSentinels: [\"s1:1\", \"s2:2\"]\nredisMaster: mymaster\nlogLevel: warn\n"+
		"redisTls: {ca: /ca.pem, serverName: redis.internal}\nlimiter: {policy: deny}\n")
	cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": path, "PAYSERVER_LOG_FORMAT": "json",
		"PAYSERVER_REDIS_SENTINELS": "s3:3, s4:4", "PAYSERVER_REDIS_SENTINEL_PASSWORD": "sp"}))
	if err != nil {
		t.Fatal(err)
	}
	mode, inferred := cfg.EffectiveRedisMode()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"mode", mode, RedisSentinel},
		{"inferred", inferred, false},
		{"sentinels (env wins)", cfg.RedisSentinels, []string{"s3:3", "s4:4"}},
		{"master", cfg.RedisMaster, "mymaster"},
		{"sentinel password", cfg.RedisSentinelPassword, "sp"},
		{"log level", cfg.LogLevel, slog.LevelWarn},
		{"log format", cfg.LogFormat, LogJSON},
		{"tls on", cfg.RedisTLS.On(), true},
		{"tls server name", cfg.RedisTLS.ServerName, "redis.internal"},
		{"policy", cfg.Limiter.Policy, ratelimit.PolicyDeny},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !reflectEqual(c.got, c.want) {
				t.Errorf("got %#v, want %#v", c.got, c.want)
			}
		})
	}
}

func reflectEqual(a, b any) bool {
	if as, ok := a.([]string); ok {
		bs, _ := b.([]string)
		return slices.Equal(as, bs)
	}
	return a == b
}

// TestRedisModeInference: without PAYSERVER_REDIS_MODE the mode is inferred
// as before it existed, and says so (openRedis then checks it).
func TestRedisModeInference(t *testing.T) {
	for _, c := range []struct {
		env          map[string]string
		want         RedisMode
		wantInferred bool
	}{
		{map[string]string{}, RedisEmbedded, false},
		{map[string]string{"PAYSERVER_REDIS_ADDR": "a:1"}, RedisStandalone, true},
		{map[string]string{"PAYSERVER_REDIS_ADDR": "a:1,b:2"}, RedisCluster, true},
		{map[string]string{"PAYSERVER_REDIS_ADDR": "a:1", "PAYSERVER_REDIS_MODE": "cluster"}, RedisCluster, false},
	} {
		t.Run(fmt.Sprint(c.env), func(t *testing.T) {
			env := map[string]string{"PAYSERVER_CONFIG": "/dev/null"}
			for k, v := range c.env {
				env[k] = v
			}
			cfg, err := LoadConfig(envFrom(env))
			if err != nil {
				t.Fatal(err)
			}
			got, inferred := cfg.EffectiveRedisMode()
			if got != c.want || inferred != c.wantInferred {
				t.Errorf("got %s (inferred %v), want %s (inferred %v)", got, inferred, c.want, c.wantInferred)
			}
		})
	}
}

// TestUnknownEnvReported: a misspelt PAYSERVER_* variable is reported (Run
// warns), the test tooling's variables are not, and the start goes on.
func TestUnknownEnvReported(t *testing.T) {
	cfg, err := LoadConfig(envFrom(map[string]string{
		"PAYSERVER_CONFIG":          "/dev/null",
		"PAYSERVER_LIMITER_POLCY":   "deny",
		"PAYSERVER_REDIS_ADRR":      "x:1",
		"PAYSERVER_TEST_REDIS_ADDR": "127.0.0.1:1",
		"PAYSERVER_IT_FAILOVER":     "1",
		"PAYSERVER_SERVICES_DIR":    "/tmp/x",
		"OTHER_VAR":                 "1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"PAYSERVER_LIMITER_POLCY", "PAYSERVER_REDIS_ADRR"}; !slices.Equal(cfg.UnknownEnv, want) {
		t.Fatalf("got unknown %v, want %v", cfg.UnknownEnv, want)
	}
}

// TestBadEnvValueNamesVariable: a value the decoder refuses is reported
// with the variable's name.
func TestBadEnvValueNamesVariable(t *testing.T) {
	_, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": "/dev/null", "PAYSERVER_LIMITER_TIMEOUT": "soon"}))
	if err == nil || !strings.Contains(err.Error(), "PAYSERVER_LIMITER_TIMEOUT") {
		t.Fatalf("got %v, want an error naming PAYSERVER_LIMITER_TIMEOUT", err)
	}
}

// TestEnvKeysDocumented: every variable payserver reads is in
// docs/CONFIGURATION.md, and every PAYSERVER_* name there is read.
func TestEnvKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, n := range regexp.MustCompile("`(PAYSERVER_[A-Z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[n[1]] = true
	}
	for name := range envKeys {
		if !documented[name] {
			t.Errorf("%s is read but not in docs/CONFIGURATION.md", name)
		}
	}
	moved := map[string]bool{}
	for _, m := range movedVariables {
		moved[m.Env] = true
	}
	for name := range documented {
		_, removed := removedEnv(name)
		if _, ok := envKeys[name]; !ok && !removed && !moved[name] && !testToolingVar(name) {
			t.Errorf("docs/CONFIGURATION.md lists %s, which payserver does not read", name)
		}
	}
}

// TestRemovedSettingsDocumented: every removed setting is listed, variable
// and YAML key, in docs/CONFIGURATION.md's "Removed settings", and none is
// read any more.
func TestRemovedSettingsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Removed settings\n")
	if !ok {
		t.Fatal(`docs/CONFIGURATION.md has no "## Removed settings" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, r := range removedSettings {
		if !strings.Contains(section, "`"+r.Env+"`") || !strings.Contains(section, "`"+r.YAML+"`") {
			t.Errorf("%s (%s) is not in docs/CONFIGURATION.md's removed settings", r.Env, r.YAML)
		}
		if _, ok := envKeys[r.Env]; ok {
			t.Errorf("%s is removed but still read", r.Env)
		}
	}
	for _, m := range movedVariables {
		if !strings.Contains(section, "`"+m.Env+"`") {
			t.Errorf("%s is not in docs/CONFIGURATION.md's removed settings", m.Env)
		}
	}
}

// TestRemovedSettings: a removed YAML key refuses the start, naming the key
// and why it went; a removed variable is reported like an unknown one (Run
// warns with why) and the start goes on.
func TestRemovedSettings(t *testing.T) {
	for _, r := range removedSettings {
		t.Run(r.YAML, func(t *testing.T) {
			head, last, _ := strings.Cut(r.YAML, ".")
			yaml := head + ": 1\n"
			if last != "" {
				yaml = head + ":\n  " + last + ": 1\n"
			}
			_, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": writeTemp(t, yaml)}))
			if err == nil || !strings.Contains(err.Error(), r.YAML+" was removed: "+r.Why) {
				t.Fatalf("got %v, want the start refused naming %s and why", err, r.YAML)
			}
			cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": "/dev/null", r.Env: "1"}))
			if err != nil || !slices.Contains(cfg.UnknownEnv, r.Env) {
				t.Fatalf("%s set: %v, unknown %v; want the start to go on with it reported", r.Env, err, cfg.UnknownEnv)
			}
		})
	}
}

// TestUnknownYAMLKeyNamed: an unknown YAML key, at any depth, refuses the
// start with the key's name.
func TestUnknownYAMLKeyNamed(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"htpAddr: x\n", "unknown keys: htpAddr"},
		{"limiter:\n  polcy: deny\n", "polcy"},
		{"channels:\n  ALIPAY: {latncy: 5ms}\n", "latncy"},
	} {
		t.Run(c.want, func(t *testing.T) {
			_, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": writeTemp(t, c.yaml)}))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestYAMLDurationNeedsUnit: a bare number where a duration is expected is
// refused, not read as nanoseconds (a 50 ns limiter timeout would refuse
// every payment).
func TestYAMLDurationNeedsUnit(t *testing.T) {
	for _, y := range []string{"limiter:\n  timeout: 50\n", "channelTimeout: 5\n", "shutdownTimeout: 1.5\n"} {
		t.Run(strings.TrimSpace(y), func(t *testing.T) {
			cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": writeTemp(t, y)}))
			if err == nil || !strings.Contains(err.Error(), "give a unit") {
				t.Fatalf("got %v (limiter timeout %v, channel timeout %v), want a refusal asking for a unit", err, cfg.Limiter.Timeout, cfg.ChannelTimeout)
			}
		})
	}
	cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": writeTemp(t, "limiter:\n  timeout: 75ms\n")}))
	if err != nil || cfg.Limiter.Timeout != 75*time.Millisecond {
		t.Fatalf("75ms: got %v, %v; want 75ms", cfg.Limiter.Timeout, err)
	}
}

func TestResolverOwnerFitsItsColumn(t *testing.T) {
	short := resolverOwner("host/127.0.0.1:8080", 42)
	if short != "host/127.0.0.1:8080/42" {
		t.Fatalf("short name changed: %q", short)
	}
	long := strings.Repeat("h", 300)
	a, b := resolverOwner(long+"a", 1), resolverOwner(long+"b", 1)
	if len(a) > pay.MaxOwnerLen || a == b {
		t.Fatalf("long names %q and %q: want at most %d bytes and apart", a, b, pay.MaxOwnerLen)
	}
}

// TestStaleAfterBelowTheCallTimeoutIsRefused: a PROCESSING order younger
// than a channel call may be in flight; a sweep after less than the call
// timeout would mark it UNKNOWN, and the resolver could close it and free
// its slot while the call still reaches the channel. Such a setting was
// accepted.
func TestStaleAfterBelowTheCallTimeoutIsRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ChannelTimeout, cfg.OrderStaleAfter = 5*time.Second, 3*time.Second
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "PAYSERVER_ORDER_STALE_AFTER") {
		t.Fatalf("stale after 3s with a 5s channel timeout: %v, want a refusal naming PAYSERVER_ORDER_STALE_AFTER", err)
	}
	cfg.OrderStaleAfter = 6 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatalf("stale after 6s with a 5s channel timeout: %v", err)
	}
}

// TestNoAdminTokenNeedsALoopbackListener: without an admin token, admin
// access rests on the request being local; a listener on another address
// is refused at start, naming the setting.
func TestNoAdminTokenNeedsALoopbackListener(t *testing.T) {
	for _, addr := range []string{":8080", "0.0.0.0:8080", "10.0.0.7:8080", "[::]:8080", "payserver.internal:8080"} {
		cfg := DefaultConfig()
		cfg.LimitsFile, cfg.HTTPAddr = "configs/channel-limits.yaml", addr
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PAYSERVER_ADMIN_TOKEN") {
			t.Errorf("httpAddr %s without an admin token: got %v, want a refusal naming PAYSERVER_ADMIN_TOKEN", addr, err)
		}
		cfg.AdminToken = "admin-token-0123456789"
		if err := cfg.Validate(); err != nil {
			t.Errorf("httpAddr %s with an admin token: %v", addr, err)
		}
	}
	cfg := DefaultConfig()
	cfg.LimitsFile = "configs/channel-limits.yaml"
	if err := cfg.Validate(); err != nil {
		t.Errorf("the default loopback httpAddr without an admin token: %v", err)
	}
}

// TestAdminTokenStrength: the admin token is at least 16 characters
// without whitespace, as client tokens are; the refusal does not quote it.
func TestAdminTokenStrength(t *testing.T) {
	for _, token := range []string{"Zq", "fifteen-chars-x", "sixteen chars xx", "sixteen-chars-xx\n"} {
		cfg := DefaultConfig()
		cfg.LimitsFile, cfg.AdminToken = "configs/channel-limits.yaml", token
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "PAYSERVER_ADMIN_TOKEN") || strings.Contains(err.Error(), token) {
			t.Errorf("admin token %q: got %v, want a refusal naming PAYSERVER_ADMIN_TOKEN, not the token", token, err)
		}
	}
}

// TestMovedVariablesRefuseTheStart: a variable whose setting moved (an
// alias, a second way to set one number, a benchmark's switch now in the
// settings file) refuses the start, naming what to use, rather than being
// ignored and changing what payserver does.
func TestMovedVariablesRefuseTheStart(t *testing.T) {
	for _, m := range movedVariables {
		t.Run(m.Env, func(t *testing.T) {
			_, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": "/dev/null", m.Env: "1"}))
			if err == nil || !strings.Contains(err.Error(), m.Env) || !strings.Contains(err.Error(), m.Use) {
				t.Fatalf("LoadConfig with %s set: %v; want a refusal naming it and %q", m.Env, err, m.Use)
			}
			if _, known := envKeys[m.Env]; known {
				t.Fatalf("%s is moved and still read", m.Env)
			}
		})
	}
	// Empty means unset, as for every variable.
	if _, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": "/dev/null", "PAYSERVER_REDIS_ADDRS": ""})); err != nil {
		t.Fatalf("an empty moved variable: %v", err)
	}
}
