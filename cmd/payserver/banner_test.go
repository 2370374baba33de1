package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestStartBannerNamesTheDashboard: the banner gives the dashboard's URL
// and how to log in: the admin token when one is set (never the token
// itself), else that this machine needs no login.
func TestStartBannerNamesTheDashboard(t *testing.T) {
	for _, tt := range []struct {
		name, token string
		want        []string
	}{
		{"no admin token", "", []string{"http://127.0.0.1:8080/dashboard", "no login from this machine"}},
		{"admin token", "s3cret-admin-token", []string{"http://127.0.0.1:8080/dashboard", "log in with PAYSERVER_ADMIN_TOKEN"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []LogFormat{LogText, LogJSON} {
				cfg := DefaultConfig()
				cfg.LogFormat, cfg.AdminToken = format, tt.token
				var out bytes.Buffer
				startBanner(cfg, "127.0.0.1:8080", newLogger(cfg, &out), &out)
				s := out.String()
				if format == LogJSON {
					var rec map[string]any
					if err := json.Unmarshal(out.Bytes(), &rec); err != nil || rec["dashboard"] == nil {
						t.Errorf("JSON banner %q has no dashboard field", s)
					}
				}
				for _, want := range tt.want {
					if !strings.Contains(s, want) {
						t.Errorf("%s banner lacks %q:\n%s", format, want, s)
					}
				}
				if tt.token != "" && strings.Contains(s, tt.token) {
					t.Errorf("the banner shows the admin token:\n%s", s)
				}
			}
		})
	}
}
