package main

import (
	"strings"
	"testing"
)

func TestParseClientTokens(t *testing.T) {
	got, err := parseClientTokens(" refunds=0123456789abcdef , payouts.v2=fedcba9876543210x,", "admin-token-000000")
	if err != nil || len(got) != 2 || got[0].Name != "refunds" || got[1].Token != "fedcba9876543210x" {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"no equals", "refunds", "want name=token"},
		{"bad name", "re funds=0123456789abcdef", "name"},
		{"reserved name", "pay=0123456789abcdef", "reserved"},
		{"short token", "refunds=short", "at least 16"},
		{"admin token", "refunds=admin-token-000000", "admin token"},
		{"duplicate name", "a=0123456789abcdef,a=0123456789abcdeX", "given twice"},
		{"shared token", "a=0123456789abcdef,b=0123456789abcdef", "another client's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseClientTokens(tc.in, "admin-token-000000")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "0123456789abcdef") || strings.Contains(err.Error(), "admin-token") {
				t.Errorf("the error quotes a token: %v", err)
			}
		})
	}
}

func TestLoadAPIConfig(t *testing.T) {
	env := map[string]string{"PAYSERVER_LIMIT_MAX_WAITERS": "7", "PAYSERVER_GRPC_ADDR": "127.0.0.1:0"}
	c, err := loadAPIConfig(func(k string) string { return env[k] }, nil, "", nil)
	if err != nil || c.MaxWaiters != 7 || c.GRPCAddr != "127.0.0.1:0" || len(c.ClientTokens) != 0 {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range []map[string]string{{"PAYSERVER_LIMIT_MAX_WAITERS": "0"}, {"PAYSERVER_GRPC_ADDR": "nohostport"}} {
		if _, err := loadAPIConfig(func(k string) string { return bad[k] }, nil, "", nil); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestClientTokenEntryErrorsNeverEchoSecrets: an entry written the wrong
// way round, or with a wrong separator, has its token where the name
// belongs; the refusal must not print it.
func TestClientTokenEntryErrorsNeverEchoSecrets(t *testing.T) {
	const secret = "Zr8fQ2vK9xLm4TnB7wYc"
	// The last: the wrong way round, with a name long enough to pass as a
	// token. Names are at most 15 characters and tokens at least 16, so no
	// swapped entry parses.
	for _, in := range []string{secret + "=refunds", "refunds:" + secret + "+/aa=", secret + "=refunds-service-eu"} {
		_, err := parseClientTokens(in, "admin-token-000000")
		if err == nil || strings.Contains(err.Error(), "Zr8f") {
			t.Errorf("parseClientTokens(%q) = %v; want a refusal that does not echo the token", in, err)
		}
	}
}

// TestClientsFromTheSettingsFile: clients in the settings file carry the
// bizTypes they may use; those of PAYSERVER_CLIENT_TOKENS may use every
// bizType and are listed as unscoped. Names and tokens are unique across
// both, and a bad bizType is refused naming the client.
func TestClientsFromTheSettingsFile(t *testing.T) {
	env := map[string]string{"PAYSERVER_CLIENT_TOKENS": "jobs=0123456789abcdefJOBS"}
	file := map[string]ClientConfig{"refunds": {Token: "0123456789abcdefREFUNDS", BizTypes: []string{"REFUND"}}}
	c, err := loadAPIConfig(func(k string) string { return env[k] }, nil, "", file)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ClientTokens) != 2 || len(c.Scopes) != 1 || len(c.Scopes["refunds"]) != 1 || c.Scopes["refunds"][0] != "REFUND" {
		t.Fatalf("got clients %v, scopes %v; want jobs and refunds, refunds limited to REFUND", c.ClientTokens, c.Scopes)
	}
	if len(c.Unscoped) != 1 || c.Unscoped[0] != "jobs" {
		t.Fatalf("unscoped %v, want [jobs]", c.Unscoped)
	}
	for name, bad := range map[string]map[string]ClientConfig{
		"name twice":  {"jobs": {Token: "0123456789abcdefOTHER", BizTypes: []string{"REFUND"}}},
		"token twice": {"other": {Token: "0123456789abcdefJOBS", BizTypes: []string{"REFUND"}}},
		"bad bizType": {"other": {Token: "0123456789abcdefOTHER", BizTypes: []string{"refund!"}}},
		"short token": {"other": {Token: "short", BizTypes: []string{"REFUND"}}},
		"long name":   {"refunds-service-eu": {Token: "0123456789abcdefOTHER", BizTypes: []string{"REFUND"}}},
		"no bizTypes": {"other": {Token: "0123456789abcdefOTHER", BizTypes: []string{}}},
	} {
		if _, err := loadAPIConfig(func(k string) string { return env[k] }, nil, "", bad); err == nil || strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("%s: got %v, want a refusal that does not quote the token", name, err)
		}
	}
}

// TestClientsYAML: the settings file's clients key is read with its scopes.
func TestClientsYAML(t *testing.T) {
	p := writeTemp(t, "clients:\n  refunds: {token: \"0123456789abcdefREFUNDS\", bizTypes: [REFUND]}\n")
	cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": p}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.API.ClientTokens) != 1 || cfg.API.ClientTokens[0].Name != "refunds" || cfg.API.Scopes["refunds"][0] != "REFUND" {
		t.Fatalf("got clients %v scopes %v", cfg.API.ClientTokens, cfg.API.Scopes)
	}
}

// TestPayTokensConfig: PAYSERVER_PAY_TOKENS follows the client tokens'
// rules, and a pay token is no client's token nor the admin's.
func TestPayTokensConfig(t *testing.T) {
	env := map[string]string{"PAYSERVER_CLIENT_TOKENS": "jobs=0123456789abcdefJOBS", "PAYSERVER_PAY_TOKENS": "core=0123456789abcdefCORE"}
	c, err := loadAPIConfig(func(k string) string { return env[k] }, nil, "admin-token-000000", nil)
	if err != nil || len(c.PayTokens) != 1 || c.PayTokens[0].Name != "core" {
		t.Fatalf("got %v, %v; want the pay caller core", c.PayTokens, err)
	}
	for _, bad := range []string{"core=0123456789abcdefJOBS", "core=admin-token-000000", "core=short", "0123456789abcdefCORE=core"} {
		env["PAYSERVER_PAY_TOKENS"] = bad
		if _, err := loadAPIConfig(func(k string) string { return env[k] }, nil, "admin-token-000000", nil); err == nil || !strings.Contains(err.Error(), "PAYSERVER_PAY_TOKENS") {
			t.Errorf("%s: got %v, want a refusal naming PAYSERVER_PAY_TOKENS", bad, err)
		}
	}
}

// TestServiceSettingsFromEitherSource: the limits service's and payment
// routes' settings are read through koanf like every other, so the
// settings file sets them as the variables do, and a variable wins over the
// file.
func TestServiceSettingsFromEitherSource(t *testing.T) {
	p := writeTemp(t, "grpcAddr: 127.0.0.1:7000\ngrpcFailureModeDeny: true\nlimitMaxWaiters: 7\n"+
		"clientTokens: jobs=0123456789abcdefJOBS\npayTokens: core=0123456789abcdefCORE\nchannelCodes: [WECHAT]\n")
	cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": p}))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.API
	if a.GRPCAddr != "127.0.0.1:7000" || !a.GRPCFailureModeDeny || a.MaxWaiters != 7 || len(a.ClientTokens) != 1 || len(a.PayTokens) != 1 {
		t.Fatalf("from the file: %+v", a)
	}
	if _, ok := cfg.Channels["WECHAT"]; !ok || len(cfg.Channels) != 1 {
		t.Fatalf("channels %v, want WECHAT alone", cfg.Channels)
	}
	cfg, err = LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": p, "PAYSERVER_LIMIT_MAX_WAITERS": "9", "PAYSERVER_CHANNELS": "ALIPAY, UNIONPAY"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.MaxWaiters != 9 || len(cfg.Channels) != 2 {
		t.Fatalf("variables over the file: max waiters %d, channels %v", cfg.API.MaxWaiters, cfg.Channels)
	}
	for _, codes := range []string{"ALIPAY, WECHAT", "[ALIPAY, WECHAT]"} {
		cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": writeTemp(t, "channelCodes: "+codes+"\n")}))
		if err != nil || len(cfg.Channels) != 2 {
			t.Fatalf("channelCodes: %s: channels %v, %v; want ALIPAY and WECHAT alone", codes, cfg.Channels, err)
		}
	}
	if _, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": p, "PAYSERVER_GRPC_FAILURE_MODE_DENY": "yes"})); err == nil ||
		!strings.Contains(err.Error(), "PAYSERVER_GRPC_FAILURE_MODE_DENY") {
		t.Fatalf("a bad value: %v, want a refusal naming the variable", err)
	}
	// Tokens as a YAML list are the variable's comma list.
	list := writeTemp(t, "clientTokens: [jobs=0123456789abcdefJOBS, ops=0123456789abcdefOPSS]\npayTokens:\n  - core=0123456789abcdefCORE\n")
	if cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": list})); err != nil || len(cfg.API.ClientTokens) != 2 || len(cfg.API.PayTokens) != 1 {
		t.Fatalf("tokens as lists: %+v, %v; want 2 clients and 1 pay caller", cfg.API, err)
	}
	// A bad value read from the file is named by its key there, never by
	// a variable the operator did not set.
	for _, body := range []string{"clientTokens: jobs\n", "payTokens: [core]\n", "grpcFailureModeDeny: maybe\n", "limitMaxWaiters: 0\n"} {
		bad := writeTemp(t, body)
		key, _, _ := strings.Cut(body, ":")
		_, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": bad}))
		if err == nil || !strings.Contains(err.Error(), key+" in "+bad) || strings.Contains(err.Error(), "PAYSERVER_") {
			t.Errorf("%q: %v; want a refusal naming %s in the file", body, err, key)
		}
	}
}
