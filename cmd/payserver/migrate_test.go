package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMigrateHelpDoesNotMigrate: `migrate --help` prints the command's
// usage and leaves the database alone (it used to migrate the SQLite file);
// an argument migrate does not take is refused.
func TestMigrateHelpDoesNotMigrate(t *testing.T) {
	dir := t.TempDir()
	env := envFrom(map[string]string{"PAYSERVER_DATA_DIR": dir, "PAYSERVER_CONFIG": "/dev/null"})
	for _, tt := range []struct {
		arg      string
		wantCode int
	}{{"--help", 0}, {"-h", 0}, {"help", 0}, {"--dry-run", 2}, {"now", 2}} {
		t.Run(tt.arg, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run([]string{"migrate", tt.arg}, env, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(out.String()+errOut.String(), "usage: payserver migrate") {
				t.Errorf("migrate %s = %d, stdout %q, stderr %q; want %d and the usage", tt.arg, code, out.String(), errOut.String(), tt.wantCode)
			}
			if _, err := os.Stat(filepath.Join(dir, "payserver.db")); !os.IsNotExist(err) {
				t.Fatalf("migrate %s opened the database (stat: %v)", tt.arg, err)
			}
		})
	}
}

// TestMigratePrintsVersions: `migrate` prints each migration it applied and
// the version reached, and "already at N" when there is nothing to do.
func TestMigratePrintsVersions(t *testing.T) {
	env := envFrom(map[string]string{"PAYSERVER_DATA_DIR": t.TempDir(), "PAYSERVER_CONFIG": "/dev/null", "PAYSERVER_LOG_LEVEL": "warn"})
	var out, errOut bytes.Buffer
	if code := run([]string{"migrate"}, env, &out, &errOut); code != 0 {
		t.Fatalf("migrate = %d: %s", code, errOut.String())
	}
	first := regexp.MustCompile(`(?m)^applied 00001_orders\.sql\n(applied \d+_\w+\.sql\n)*schema at version (\d+)\n$`).FindStringSubmatch(out.String())
	if first == nil {
		t.Fatalf("first migrate printed %q, want one \"applied FILE\" line per migration, then \"schema at version N\"", out.String())
	}
	out.Reset()
	if code := run([]string{"migrate"}, env, &out, &errOut); code != 0 {
		t.Fatalf("second migrate = %d: %s", code, errOut.String())
	}
	if want := "already at " + first[2] + "\n"; out.String() != want {
		t.Errorf("second migrate printed %q, want %q", out.String(), want)
	}
}
