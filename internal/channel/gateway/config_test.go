package gateway

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"payserver/internal/testutil"
)

// TestValidate: each wrong field is refused by name; good configs pass.
func TestValidate(t *testing.T) {
	good := Config{Code: testCode, BaseURL: "https://gw.internal:8443/alipay", Keys: keysOf(testSecret),
		CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "c.key", ServerName: "gw"}
	cases := []struct {
		name   string
		change func(*Config)
		field  string // "" for a valid config
	}{
		{name: "good https", change: func(*Config) {}},
		{name: "good http", change: func(c *Config) { *c = Config{Code: "X", BaseURL: "http://127.0.0.1:9000", Keys: keysOf(testSecret)} }},
		{name: "no code", change: func(c *Config) { c.Code = "" }, field: "Code"},
		{name: "a throttle code", change: func(c *Config) { c.ThrottleCodes = []string{"FREQUENCY_LIMITED"} }},
		{name: "an empty throttle code", change: func(c *Config) { c.ThrottleCodes = []string{" "} }, field: "ThrottleCodes"},
		{name: "an unknown-outcome throttle code", change: func(c *Config) { c.ThrottleCodes = []string{"ACQ.SYSTEM_ERROR"} }, field: "ThrottleCodes"},
		{name: "no base URL", change: func(c *Config) { c.BaseURL = "" }, field: "BaseURL"},
		{name: "not a URL", change: func(c *Config) { c.BaseURL = "http://[::1" }, field: "BaseURL"},
		{name: "another scheme", change: func(c *Config) { c.BaseURL = "ftp://gw" }, field: "BaseURL"},
		{name: "no host", change: func(c *Config) { c.BaseURL = "https:///pay" }, field: "BaseURL"},
		{name: "credentials", change: func(c *Config) { c.BaseURL = "https://u:p@gw" }, field: "BaseURL"},
		{name: "query", change: func(c *Config) { c.BaseURL = "https://gw/?a=1" }, field: "BaseURL"},
		{name: "fragment", change: func(c *Config) { c.BaseURL = "https://gw/#x" }, field: "BaseURL"},
		{name: "no keys", change: func(c *Config) { c.Keys = nil }, field: "Keys"},
		{name: "short key", change: func(c *Config) { c.Keys = keysOf([]byte("short")) }, field: "Keys"},
		{name: "negative connect timeout", change: func(c *Config) { c.ConnectTimeout = -1 }, field: "ConnectTimeout"},
		{name: "negative call timeout", change: func(c *Config) { c.CallTimeout = -1 }, field: "CallTimeout"},
		{name: "negative max conns", change: func(c *Config) { c.MaxConns = -1 }, field: "MaxConns"},
		{name: "CA file on http", change: func(c *Config) { c.BaseURL = "http://gw"; c.CertFile, c.KeyFile, c.ServerName = "", "", "" }, field: "CAFile"},
		{name: "server name on http", change: func(c *Config) { c.BaseURL = "http://gw"; c.CAFile, c.CertFile, c.KeyFile = "", "", "" }, field: "ServerName"},
		{name: "cert without key", change: func(c *Config) { c.KeyFile = "" }, field: "KeyFile"},
		{name: "key without cert", change: func(c *Config) { c.CertFile = "" }, field: "CertFile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.change(&c)
			err := c.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
				t.Errorf("Validate: %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// TestNewChannelTLSFiles: TLS files that cannot be used are refused by
// NewChannel, naming the field.
func TestNewChannelTLSFiles(t *testing.T) {
	ca := newTestCA(t, "ca")
	_, certPEM, keyPEM := ca.issue(t, "payserver", 0)
	caFile, certFile, keyFile := writeFile(t, "ca.pem", ca.pem), writeFile(t, "c.pem", certPEM), writeFile(t, "c.key", keyPEM)
	notPEM := writeFile(t, "junk", []byte("not a certificate"))
	cases := []struct {
		name                      string
		caFile, certFile, keyFile string
		field                     string
	}{
		{name: "all good", caFile: caFile, certFile: certFile, keyFile: keyFile},
		{name: "missing CA file", caFile: caFile + ".missing", field: "CAFile"},
		{name: "CA file without PEM", caFile: notPEM, field: "CAFile"},
		{name: "bad client cert", caFile: caFile, certFile: notPEM, keyFile: keyFile, field: "CertFile"},
		{name: "key of another cert", caFile: caFile, certFile: caFile, keyFile: keyFile, field: "CertFile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("https://127.0.0.1:1")
			cfg.CAFile, cfg.CertFile, cfg.KeyFile = tc.caFile, tc.certFile, tc.keyFile
			_, err := NewChannel(cfg, nil, nil)
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("NewChannel: %v, want nil", err)
			case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
				t.Errorf("NewChannel: %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// TestConfigHidesSecret: a Config printed or logged (text or JSON) shows
// no secret.
func TestConfigHidesSecret(t *testing.T) {
	cfg := testConfig("http://127.0.0.1:1")
	logger, logs := testLogger()
	logger.Info("config", "cfg", cfg, "key", cfg.Keys[0])
	text := &testutil.LogBuffer{}
	slog.New(slog.NewTextHandler(text, nil)).Info("config", "cfg", cfg, "key", cfg.Keys[0])
	for name, out := range map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "JSON log": logs.String(), "text log": text.String(),
		"keys %+v": fmt.Sprintf("%+v %s", cfg.Keys, testCode),
	} {
		if !strings.Contains(out, testCode) {
			t.Errorf("%s: %s, want the code in it", name, out)
		}
		for _, s := range []string{string(testSecret), base64.StdEncoding.EncodeToString(testSecret), fmt.Sprint(testSecret)} {
			if strings.Contains(out, s) {
				t.Errorf("%s holds the secret: %s", name, out)
			}
		}
	}
}
