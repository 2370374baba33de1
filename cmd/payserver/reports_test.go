package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportCLITimes: `payserver report` reads its times as the HTTP
// reports do: both may be left out (the hour before now), and a bad one is
// told the forms it may take.
func TestReportCLITimes(t *testing.T) {
	env := envFrom(map[string]string{"PAYSERVER_DATA_DIR": t.TempDir(), "PAYSERVER_CONFIG": "/dev/null", "PAYSERVER_LOG_LEVEL": "warn"})
	var out, errOut bytes.Buffer
	if code := run([]string{"migrate"}, env, &out, &errOut); code != 0 {
		t.Fatalf("migrate = %d: %s", code, errOut.String())
	}
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		want     string // in stderr
	}{
		{"no times", nil, 0, ""},
		{"only to", []string{"--to", "-1h"}, 0, ""},
		{"relative", []string{"--from", "-2h", "--to", "now", "--format", "json"}, 0, ""},
		{"not a time", []string{"--from", "yesterday"}, 2, "--from must be an RFC 3339 time"},
		{"a positive duration", []string{"--from", "1h"}, 2, "--from a duration must be negative"},
		{"empty", []string{"--to", ""}, 2, "--to must not be empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out.Reset()
			errOut.Reset()
			code := run(append([]string{"report"}, tt.args...), env, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("report %q = %d, stderr %q; want %d and %q", tt.args, code, errOut.String(), tt.wantCode, tt.want)
			}
		})
	}
}
